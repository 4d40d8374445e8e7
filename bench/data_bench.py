"""`meshwork data prepare` against the tokenizers wheel's own batch encoder (bench/data.sh).

  data_bench.py corpus DIR MB        deterministic corpus.jsonl of >= MB megabytes + a trained
                                     byte-level BPE tokenizer (asked for 32k, about 28k learnt) in DIR/tokenizer
  data_bench.py baseline TOKENIZER FILE BATCH_BYTES   JSON: seconds of encode_batch and
                                     encode_batch_fast over the file's documents (already in
                                     memory: the encoder alone), in batches of BATCH_BYTES of text
"""
import json
import os
import random
import sys
import time

SYLLABLES = ["ka", "lo", "mer", "tis", "an", "dre", "qu", "el", "or", "ing", "ath", "sch", "ver", "ung",
             "ity", "pre", "con", "str", "ble", "ous", "ment", "ion", "ph", "ght", "w", "y", "z"]
EXTRA = ["café", "naïve", "Ünïcödé", "😀", "🚀", "漢字", "かな", "한국어", "العربية", "—", "“quoted”", "1,234.56",
         "2026-11-25", "def f(x):", "{\"k\": [1, 2]}", "https://example.org/a?b=c", "\t", "  "]


def corpus(d, mb):
    rng = random.Random(20240801)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(30000)]
    weights = [1.0 / (i + 1) for i in range(len(words))]  # Zipf-like, as in real text
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "corpus.jsonl")
    target, written = mb * 1_000_000, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            n = rng.randint(100, 1500)
            toks = rng.choices(words, weights, k=n)
            for i in range(0, n, 97):
                toks[i] = rng.choice(EXTRA)
            sentences, out = [], []
            for i, w in enumerate(toks):
                out.append(w.capitalize() if not out else w)
                if i % 13 == 12:
                    sentences.append(" ".join(out) + rng.choice([".", "!", "?", ",\n", ".\n\n"]))
                    out = []
            line = json.dumps({"text": " ".join(sentences + out), "id": written}, ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=32000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    sample = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= 3000:
                break
            sample.append(json.loads(line)["text"])
    tok.train_from_iterator(sample, trainer)
    os.makedirs(os.path.join(d, "tokenizer"), exist_ok=True)
    tok.save(os.path.join(d, "tokenizer", "tokenizer.json"))
    with open(os.path.join(d, "tokenizer", "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|endoftext|>"}, f)
    print(json.dumps({"bytes": written, "path": path}))


def baseline(tokenizer, path, batch_bytes):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer)
    batches, docs, size, total = [], [], 0, 0
    with open(path, "rb") as f:
        for line in f:
            total += len(line)
            docs.append(json.loads(line)["text"])
            size += len(line)
            if size >= batch_bytes:
                batches.append(docs)
                docs, size = [], 0
    batches.append(docs)
    result = {"bytes": total}
    for name in ["encode_batch", "encode_batch_fast"]:
        fn = getattr(tok, name, None)
        if fn is None:
            continue
        t0, tokens = time.perf_counter(), 0
        for b in batches:
            tokens += sum(len(e.ids) for e in fn(b, add_special_tokens=True))
        result[name] = {"seconds": time.perf_counter() - t0, "tokens": tokens}
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1] == "corpus":
        corpus(sys.argv[2], int(sys.argv[3]))
    else:
        baseline(sys.argv[2], sys.argv[3], int(sys.argv[4]))
