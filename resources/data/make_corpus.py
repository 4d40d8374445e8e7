#!/usr/bin/env python3
"""Rebuilds kjv.bin: the bundled sample corpus of meshtrain (see SOURCE.md).

Usage: bible -p /usr/lib -l 1000 "Gen1:1-Mal4:6" > kjv.txt   (Debian package bible-kjv)
       python3 make_corpus.py kjv.txt kjv.bin
Takes the first 1,200,000 bytes (ASCII), tokenizes them byte-level (token = byte value, vocab
256) and writes an llm.c shard: 256 x int32 header (magic 20240520, version 1, token count),
then the tokens as uint16 little-endian.
"""
import struct
import sys

LIMIT = 1_200_000
text = open(sys.argv[1], "rb").read()[:LIMIT]
header = [0] * 256
header[0], header[1], header[2] = 20240520, 1, len(text)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % len(text), *text))
