#!/usr/bin/env python3
"""The archive `skainet export` writes is IREE's own, entry for entry.

    check_archive.py SKAINET MODEL.gguf WORKDIR

For MODEL (stories260K) and its Q8_0 quantization (made here, weights carried packed), exported in
the portable form (`--kernels stablehlo`: every weight in the file's own bytes; the engine-kernel
form would hold Q8_0 in the kernels' feed order, as the eager plan repacks it):
  - iree-dump-parameters lists every tensor of the GGUF in our model.irpa, with the GGUF's byte length;
  - the entries (names, lengths, bytes) equal those of `iree-convert-parameters` run on the same GGUF;
  - each entry's bytes are the GGUF tensor's bytes (read at the offsets the dump prints, so the
    offsets are checked too).
"""
import os
import sys

from gguf import GGUFReader

from record_support import dump_parameters, export, fail, fresh_dir, quantized, run, tool


def gguf_tensors(path):
    """{name: bytes} of every tensor of a GGUF, straight from the file."""
    reader = GGUFReader(path)
    out = {}
    with open(path, "rb") as f:
        for t in reader.tensors:
            f.seek(t.data_offset)
            out[t.name] = f.read(int(t.n_bytes))
    return out


def entries(archive):
    """{name: bytes} of an archive, at the offsets and lengths iree-dump-parameters gives."""
    rows = dump_parameters(archive)
    out = {}
    with open(archive, "rb") as f:
        for name, start, length in rows:
            if name in out:
                fail(f"{archive}: entry {name} listed twice")
            f.seek(start)
            out[name] = f.read(length)
            if len(out[name]) != length:
                fail(f"{archive}: entry {name} at {start} + {length} runs past the end of the file")
    return out


def check(skainet, model, work):
    ours_dir = export(skainet, model, os.path.join(work, "export"), "--kernels", "stablehlo")
    ours_path = os.path.join(ours_dir, "model.irpa")
    theirs_path = os.path.join(work, "iree-convert.irpa")
    run([tool("iree-convert-parameters"), f"--parameters={model}", f"--output={theirs_path}", "--quiet"])

    tensors = gguf_tensors(model)
    ours, theirs = entries(ours_path), entries(theirs_path)

    missing = sorted(set(tensors) - set(ours))
    extra = sorted(set(ours) - set(tensors))
    if missing or extra:
        fail(f"{ours_path}: missing {missing[:8]} ({len(missing)}), not in the GGUF {extra[:8]} ({len(extra)})")
    for name, data in tensors.items():
        if len(ours[name]) != len(data):
            fail(f"{ours_path}: {name} has {len(ours[name])} bytes, the GGUF tensor {len(data)}")
        if ours[name] != data:
            fail(f"{ours_path}: {name}: bytes differ from the GGUF tensor's")

    if list(ours) != list(theirs):
        fail(f"entry names/order differ: ours {list(ours)[:6]}..., iree-convert-parameters {list(theirs)[:6]}...")
    for name in ours:
        if ours[name] != theirs[name]:
            fail(f"{name}: {len(ours[name])} bytes in ours, {len(theirs[name])} in iree-convert-parameters', "
                 "contents differ")
    same_file = open(ours_path, "rb").read() == open(theirs_path, "rb").read()
    print(f"  {os.path.basename(model)}: {len(ours)} entries, {sum(map(len, ours.values()))} bytes equal to the "
          f"GGUF's and iree-convert-parameters'; whole files {'identical' if same_file else 'differ (layout only)'}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    skainet, model, work = sys.argv[1:]
    fresh_dir(work)
    check(skainet, model, fresh_dir(os.path.join(work, "f32")))
    q8 = quantized(skainet, model, os.path.join(work, "q8_0.gguf"), "Q8_0")
    check(skainet, q8, fresh_dir(os.path.join(work, "q8_0")))
    print("PASS")


if __name__ == "__main__":
    main()
