#!/usr/bin/env python3
"""Compiles CUDA sources to PTX with NVRTC through ctypes (no GPU, no toolkit).

Usage: nvrtc_compile.py [--arch compute_90] [--out DIR] FILE.cu...
Loads libnvrtc.so.12 from the nvidia-cuda-nvrtc-cu12 wheel (or $NVRTC_LIB),
exits 1 with the program log on the first failure.
"""
import ctypes
import glob
import os
import sys


def load_nvrtc():
    explicit = os.environ.get("NVRTC_LIB")
    candidates = [explicit] if explicit else []
    try:
        import nvidia.cuda_nvrtc  # the wheel's namespace package

        for base in nvidia.cuda_nvrtc.__path__:
            candidates += sorted(glob.glob(os.path.join(base, "lib", "libnvrtc.so.*")))
    except ImportError:
        pass
    candidates.append("libnvrtc.so.12")
    errors = []
    for c in candidates:
        if not c or ".alt." in c:
            continue
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(f"{c}: {e}")
    sys.exit("cannot load libnvrtc.so.12:\n  " + "\n  ".join(errors))


def check(lib, status, what):
    if status != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"{what}: {lib.nvrtcGetErrorString(status).decode()}")


def compile_one(lib, path, arch, out_dir):
    src = open(path, "rb").read()
    prog = ctypes.c_void_p()
    check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(path).encode(), 0, None, None),
          "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"-default-device", b"--device-int128"]
    # Each source names its defines for the compile check in a `// nvrtc-check: -DX=Y ...` line.
    for line in src.decode().splitlines():
        if line.startswith("// nvrtc-check:"):
            opts += [o.encode() for o in line.split(":", 1)[1].split()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    status = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    text = log.value.decode(errors="replace").strip()
    if status != 0:
        print(f"FAIL {path} ({arch}):\n{text}", file=sys.stderr)
        return False
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        name = os.path.splitext(os.path.basename(path))[0] + f".{arch}.ptx"
        open(os.path.join(out_dir, name), "wb").write(ptx.value)
    entries = [l.split()[-1].rstrip("(") for l in ptx.value.decode().splitlines() if ".entry" in l]
    print(f"ok   {path} ({arch}): {len(ptx.value)} bytes of PTX, entries {entries}" + (f"\n{text}" if text else ""))
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return True


def main(argv):
    arch, out_dir, files = "compute_90", None, []
    it = iter(argv)
    for a in it:
        if a == "--arch":
            arch = next(it)
        elif a == "--out":
            out_dir = next(it)
        else:
            files.append(a)
    if not files:
        sys.exit(__doc__)
    lib = load_nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    print(f"NVRTC {major.value}.{minor.value}")
    ok = all([compile_one(lib, f, arch, out_dir) for f in files])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
