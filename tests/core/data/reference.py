"""Reference side of the data-prepare tests: trains small tokenizers with the real libraries and
computes the expected ids one document at a time, with its own reading of the document rules
(docs/trainer.md, "Preparing data"), independent of resources/python/meshwork_tokenize.py.

  reference.py train-bpe DIR [--style gpt2|llama3|llama2]   byte-level BPE tokenizer.json + config:
                                        gpt2: EOS only; llama3: a TemplateProcessing post-processor
                                        adds <|begin_of_text|>; llama2: add_bos_token in the config
  reference.py train-spm DIR            SentencePiece tokenizer.model only (Llama-2 style)
  reference.py expect TOKENIZER OUT.bin [--text-field F] [--split S] FILE...   raw uint32 ids
  reference.py sha256 FILE
"""
import argparse
import array
import hashlib
import json
import os
import sys

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Ünïcödé façade naïve café — “quotes”.",
    "Emoji: 😀🚀🎉 and CJK 漢字かなカナ, Hangul 한국어, Arabic العربية, Hindi हिन्दी.",
    "Windows line\r\nendings\r\nand tabs\tand  double  spaces.",
    "Numbers 1234567890 3.14159 and code: def f(x): return x**2 # comment",
] * 40


def train_bpe(d, style):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = {"gpt2": ["<|endoftext|>"], "llama3": ["<|begin_of_text|>", "<|end_of_text|>"],
                "llama2": ["<s>", "</s>"]}[style]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    config = {"gpt2": {"eos_token": "<|endoftext|>", "bos_token": None},
              "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
              "llama2": {"bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>", "add_bos_token": True}}[style]
    if style == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)


def train_spm(d):
    import sentencepiece as spm
    os.makedirs(d, exist_ok=True)
    text = os.path.join(d, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        for line in CORPUS:
            f.write(line.replace("\r\n", " ") + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "tokenizer"), vocab_size=600,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                   bos_id=1, eos_id=2, unk_id=0, pad_id=-1, num_threads=1,
                                   minloglevel=2)
    os.remove(text)
    os.remove(os.path.join(d, "tokenizer.vocab"))


def documents(path, field, split):
    data = open(path, "rb").read()
    if path.endswith(".jsonl"):
        for line in data.split(b"\n"):
            if line.strip():
                text = json.loads(line)[field]
                if text:
                    yield text
        return
    if split == "file":
        yield data.decode("utf-8")
        return
    group = []
    for line in data.split(b"\n") + [b""]:
        if line.strip(b" \t\r"):
            group.append(line)
            continue
        if group:  # a blank line (or the end) closes the document; its last CR belongs to the break
            group[-1] = group[-1][:-1] if group[-1].endswith(b"\r") else group[-1]
            doc = b"\n".join(group)
            if doc.strip():
                yield doc.decode("utf-8")
        group = []


def expect(a):
    config_path = os.path.join(os.path.dirname(a.tokenizer), "tokenizer_config.json")
    config = json.load(open(config_path)) if os.path.exists(config_path) else {}
    ids = array.array("I")
    if a.tokenizer.endswith(".json"):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(a.tokenizer)
        eos = tok.token_to_id(config["eos_token"])
        if "add_bos_token" in config:  # the config decides: no post-processor, BOS by hand
            bos_name = config["bos_token"]["content"] if isinstance(config["bos_token"], dict) else config["bos_token"]
            bos = [tok.token_to_id(bos_name)] if config["add_bos_token"] else []
            encode = lambda doc: bos + tok.encode(doc, add_special_tokens=False).ids
        else:  # the tokenizer's own post-processor decides
            encode = lambda doc: tok.encode(doc).ids
        for path in a.files:
            for doc in documents(path, a.text_field, a.split):
                ids.extend(encode(doc) + [eos])
    else:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
        bos = [sp.bos_id()] if config.get("add_bos_token", True) else []
        for path in a.files:
            for doc in documents(path, a.text_field, a.split):
                ids.extend(bos + sp.encode(doc) + [sp.eos_id()])
    with open(a.out, "wb") as f:
        f.write(ids.tobytes())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("args", nargs="*")
    p.add_argument("--text-field", default="text")
    p.add_argument("--split", default="paragraph")
    p.add_argument("--style", default="gpt2", choices=["gpt2", "llama3", "llama2"])
    a = p.parse_intermixed_args()
    if a.cmd == "train-bpe":
        train_bpe(a.args[0], a.style)
    elif a.cmd == "train-spm":
        train_spm(a.args[0])
    elif a.cmd == "expect":
        a.tokenizer, a.out, a.files = a.args[0], a.args[1], a.args[2:]
        expect(a)
    elif a.cmd == "sha256":
        print(hashlib.sha256(open(a.args[0], "rb").read()).hexdigest())
    else:
        sys.exit(f"unknown command {a.cmd}")


if __name__ == "__main__":
    main()
