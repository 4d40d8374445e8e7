"""The tokenizer worker of `meshwork data prepare` (run by core/data/prepare.cpp, never by hand).

The reference libraries do the encoding, so the ids are Hugging Face's own: `tokenizers`
(`Tokenizer.from_file`, batch encoder over Rust threads) for a `tokenizer.json`, `sentencepiece`
for a bare SentencePiece `tokenizer.model`. This script reads the inputs, cuts them into
documents, encodes batches of documents and streams the ids to its parent on stdout. The parent
(C++) writes the llm.c shards and the manifest. Nodes never run this: tokenization happens before
a launch.

Documents (docs/trainer.md, "Preparing data"):
  .jsonl  one document per line: the string field --text-field of the JSON object on the line
          (blank lines skipped; an empty string is no document).
  .txt    --split paragraph (default): documents are separated by one or more blank lines (lines
          holding nothing but spaces, tabs or CR); the separating line breaks and blank lines
          belong to no document and a line break at the end of the file is dropped; every other
          byte is kept (CRLF stays CRLF). --split file: the whole file is one document, byte-exact.
Ids of a document: BOS if the model expects one, the tokenizer's ids, then EOS.
  tokenizer.json: when tokenizer_config.json sets add_bos_token, encode(add_special_tokens=False)
    with BOS prepended if it is true; otherwise encode(add_special_tokens=True), the tokenizer's
    own post-processor deciding (Llama-3 adds <|begin_of_text|>, GPT-2 and Qwen2 add nothing).
  tokenizer.model: BOS when add_bos_token (tokenizer_config.json) is true or absent (Llama-2,
    Mistral), never when it is false.
  EOS: --eos, else tokenizer_config.json's eos_token, else SentencePiece's eos id.

Frames on stdout, little-endian: u32 type, u32 payload bytes, payload.
  M  JSON: tokenizer facts {"vocab_size", "bos": {"token", "id"} | null, "eos": {...}}
  T  u32 documents, then u32 token ids (whole documents only)
  P  JSON {"file": i, "bytes": bytes of file i read so far}
  F  JSON {"file": i} after the last T frame of file i
  E  JSON {"field", "value", "allowed"}: an input error; the worker exits 2 after it
"""

import argparse
import array
import json
import os
import queue
import re
import struct
import sys
import threading

FRAME = struct.Struct("<II")
T_META, T_TOKENS, T_PROGRESS, T_FILE, T_ERROR = (ord(c) for c in "MTPFE")
# Blank-line separator: the line break ending a document's last line, then one or more lines of
# nothing but spaces, tabs or CR.
SEPARATOR = re.compile(rb"\r?\n(?:[ \t\r]*\n)+")
BLOCK_BYTES = 4 << 20


class InputError(Exception):
    def __init__(self, field, value, allowed):
        super().__init__(allowed)
        self.field, self.value, self.allowed = field, value, allowed


out = sys.stdout.buffer
out_lock = threading.Lock()


def send(kind, payload):
    with out_lock:
        out.write(FRAME.pack(kind, len(payload)))
        out.write(payload)


def send_json(kind, obj):
    send(kind, json.dumps(obj).encode())


def token_text(value):
    """tokenizer_config.json writes special tokens as a string or as an AddedToken object."""
    if isinstance(value, dict):
        return value.get("content")
    return value


class Encoder:
    """One document batch in, one flat id array out (BOS/EOS placed as the docstring says)."""

    def __init__(self, path, config, eos_override, threads):
        self.path = path
        if path.endswith(".json"):
            self._open_hf(path, config)
        else:
            self._open_spm(path, config, threads)
        eos_token = eos_override or token_text(config.get("eos_token"))
        if eos_token:
            self.eos_id = self.token_id(eos_token)
            if self.eos_id is None:
                field = "--eos" if eos_override else "--tokenizer"
                allowed = ("not a token of the tokenizer" if eos_override else
                           f"tokenizer_config.json names eos_token {eos_token!r}, which the tokenizer lacks")
                raise InputError(field, eos_token if eos_override else path, allowed)
        elif self.spm is not None and self.spm.eos_id() >= 0:
            self.eos_id = self.spm.eos_id()
            eos_token = self.spm.id_to_piece(self.eos_id)
        else:
            raise InputError("--tokenizer", path,
                             "has no EOS token (no eos_token in tokenizer_config.json); name one with --eos TOKEN")
        self.eos_token = eos_token
        bos_token = token_text(config.get("bos_token"))
        if self.spm is not None and not bos_token and self.spm.bos_id() >= 0:
            bos_token = self.spm.id_to_piece(self.spm.bos_id())
        self.bos_id = self.token_id(bos_token) if bos_token else None
        if self.prepend_bos and self.bos_id is None:
            raise InputError("--tokenizer", path, "add_bos_token is true but the tokenizer has no BOS token")

    def _open_hf(self, path, config):
        from tokenizers import Tokenizer
        self.spm = None
        self.hf = Tokenizer.from_file(path)
        self.vocab_size = self.hf.get_vocab_size(with_added_tokens=True)
        # encode_batch_fast (tokenizers >= 0.21) gives the same ids without computing offsets.
        self.batch = getattr(self.hf, "encode_batch_fast", self.hf.encode_batch)
        if "add_bos_token" in config:
            self.special, self.prepend_bos = False, bool(config["add_bos_token"])
        else:
            self.special, self.prepend_bos = True, False

    def _open_spm(self, path, config, threads):
        import sentencepiece
        self.hf = None
        self.spm = sentencepiece.SentencePieceProcessor(model_file=path)
        self.vocab_size = self.spm.get_piece_size()
        self.prepend_bos = bool(config.get("add_bos_token", True))
        self.threads = threads

    def bos_used(self):
        """The BOS each document starts with, or None (a post-processor's own BOS included)."""
        first = self.encode(["a"])[0]
        if self.prepend_bos or (self.hf is not None and first != self.encode_plain("a")):
            name = self.hf.id_to_token(first) if self.hf is not None else self.spm.id_to_piece(first)
            return {"token": name, "id": first}
        return None

    def encode_plain(self, text):
        return self.hf.encode(text, add_special_tokens=False).ids[0]

    def token_id(self, text):
        if self.hf is not None:
            return self.hf.token_to_id(text)
        i = self.spm.piece_to_id(text)
        return i if i != self.spm.unk_id() or text == self.spm.id_to_piece(i) else None

    def encode(self, docs):
        ids = array.array("I")
        bos = [self.bos_id] if self.prepend_bos else []
        if self.hf is not None:
            for enc in self.batch(docs, add_special_tokens=self.special):
                d = enc.ids
                if bos and (not d or d[0] != self.bos_id):
                    ids.extend(bos)
                ids.extend(d)
                if not d or d[-1] != self.eos_id:
                    ids.append(self.eos_id)
        else:
            for d in self.spm.encode(docs, num_threads=self.threads):
                ids.extend(bos)
                ids.extend(d)
                ids.append(self.eos_id)
        return ids


def utf8(data, name, where):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError("--input", f"{name}:{where}", f"not UTF-8 text ({e.reason} at byte {e.start} of the line/document)")


def jsonl_batches(f, name, field, batch_bytes):
    """Yields (documents, bytes read so far)."""
    docs, size, done = [], 0, 0
    for line_no, line in enumerate(f, 1):
        done += len(line)
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InputError("--input", f"{name}:{line_no}", f"not a JSON object ({e})")
        if not isinstance(obj, dict):
            raise InputError("--input", f"{name}:{line_no}", f"not a JSON object (a {type(obj).__name__})")
        if field not in obj:
            keys = ", ".join(list(obj)[:8]) or "none"
            raise InputError("--input", f"{name}:{line_no}",
                             f'has no field "{field}" (fields: {keys}); choose one with --text-field')
        text = obj[field]
        if not isinstance(text, str):
            raise InputError("--input", f"{name}:{line_no}",
                             f'field "{field}" is {type(text).__name__}, not a string')
        if text:
            docs.append(text)
            size += len(line)
        if size >= batch_bytes:
            yield docs, done
            docs, size = [], 0
    yield docs, done


def strip_final_break(b):
    if b.endswith(b"\r\n"):
        return b[:-2]
    return b[:-1] if b.endswith(b"\n") else b


def txt_batches(f, name, split, batch_bytes):
    if split == "file":
        data = f.read()
        yield [utf8(data, name, "1")], len(data)
        return
    carry, done, doc_no = b"", 0, 0
    while True:
        chunk = f.read(batch_bytes)
        done += len(chunk)
        eof = not chunk
        buf = carry + chunk
        pieces, pos, last = [], 0, None
        for m in SEPARATOR.finditer(buf):
            pieces.append(buf[pos:m.start()])
            pos, last = m.end(), m.start()
        if eof:
            pieces.append(strip_final_break(buf[pos:]))
            carry = b""
        elif last is None:
            carry = buf  # no complete document yet
            continue
        else:
            # The last separator may go on in the next block: keep it with what follows.
            carry = buf[last:]
        docs = []
        for p in pieces:
            if p.strip():
                doc_no += 1
                docs.append(utf8(p, name, f"document {doc_no}"))
        yield docs, done - len(carry)
        if eof:
            return


def produce(args, q):
    try:
        for i, path in enumerate(args.inputs):
            name = os.path.basename(path)
            with open(path, "rb") as f:
                if path.endswith(".jsonl"):
                    batches = jsonl_batches(f, name, args.text_field, args.batch_bytes)
                else:
                    batches = txt_batches(f, name, args.split, args.batch_bytes)
                for docs, done in batches:
                    q.put(("docs", i, docs, done))
            q.put(("file", i, None, None))
        q.put(("end", None, None, None))
    except InputError as e:
        q.put(("error", e, None, None))
    except OSError as e:
        q.put(("error", InputError("--input", path, f"cannot be read ({e.strerror})"), None, None))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--config", default="")
    p.add_argument("--eos", default="")
    p.add_argument("--text-field", default="text")
    p.add_argument("--split", default="paragraph", choices=["paragraph", "file"])
    # Text per encoder batch (and .txt read block). $MESHWORK_DATA_BATCH_BYTES changes it: the
    # tests make it tiny so documents and separators straddle block boundaries.
    p.add_argument("--batch-bytes", type=int,
                   default=int(os.environ.get("MESHWORK_DATA_BATCH_BYTES", "0") or 0) or BLOCK_BYTES)
    p.add_argument("--threads", type=int, default=0)  # 0: every core
    p.add_argument("inputs", nargs="*")
    args = p.parse_args()
    if args.threads > 0:  # the Rust encoder's pool reads these when tokenizers is imported
        os.environ["RAYON_NUM_THREADS"] = os.environ["RAYON_RS_NUM_CPUS"] = str(args.threads)
    else:
        args.threads = os.cpu_count() or 1
    try:
        config = {}
        if args.config:
            with open(args.config, encoding="utf-8") as f:
                config = json.load(f)
        enc = Encoder(args.tokenizer, config, args.eos, args.threads)
    except InputError as e:
        send_json(T_ERROR, {"field": e.field, "value": e.value, "allowed": e.allowed})
        out.flush()
        return 2
    except Exception as e:  # the library refused the file: name it
        send_json(T_ERROR, {"field": "--tokenizer", "value": args.tokenizer,
                            "allowed": f"a tokenizer.json or SentencePiece model the library reads ({e})"})
        out.flush()
        return 2
    send_json(T_META, {
        "vocab_size": enc.vocab_size,
        "eos": {"token": enc.eos_token, "id": enc.eos_id},
        "bos": enc.bos_used(),
    })
    # Reading and cutting (Python, holds the GIL) overlaps encoding (Rust/C++, releases it).
    q = queue.Queue(maxsize=4)
    threading.Thread(target=produce, args=(args, q), daemon=True).start()
    while True:
        kind, i, docs, done = q.get()
        if kind == "end":
            break
        if kind == "error":
            send_json(T_ERROR, {"field": i.field, "value": i.value, "allowed": i.allowed})
            out.flush()
            return 2
        if kind == "file":
            send_json(T_FILE, {"file": i})
            continue
        if docs:
            ids = enc.encode(docs)
            send(T_TOKENS, struct.pack("<I", len(docs)) + ids.tobytes())
        send_json(T_PROGRESS, {"file": i, "bytes": done})
    out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the parent went away (cancelled)
        sys.exit(1)
