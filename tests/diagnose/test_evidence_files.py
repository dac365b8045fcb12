"""The knowledge base's evidence files: valid against their schema, every pattern accepted by
RE2 and matching what its comment says, every fact known, every template naming a group."""

from __future__ import annotations

import io

import jsonschema
import pytest
import yaml

from ci_matrix.diagnose.evidence import Evidence, extractors_from, problems_of, read_log
from ci_matrix.diagnose.scanner import Scanner
from ci_matrix.edges import files

EVIDENCE_FILES = files.evidence_files()


@pytest.mark.parametrize(("name", "text"), EVIDENCE_FILES, ids=[name for name, _ in EVIDENCE_FILES])
def test_each_file_is_valid(name: str, text: str) -> None:
    data = yaml.safe_load(text)
    jsonschema.validate(data, files.schema("evidence"))
    extractors = extractors_from(data)
    assert problems_of(extractors) == []
    Scanner(extractors.signatures())  # raises on a pattern RE2 rejects or one that matches nothing at all


def facts_of(log: bytes) -> dict[str, Evidence]:
    """The facts the built-in extractors read from `log`, as `diagnose` reads them."""
    extractors = files.extractors()
    return read_log(Scanner(extractors.signatures()).scan(io.BytesIO(log)), extractors)


@pytest.mark.parametrize(("line", "facts"), [
    ("  process didn't exit successfully: `/Users/me/.rustup/toolchains/nightly-2024-04-24-aarch64-apple-darwin/bin/"
     "rustc",
     {"rust-toolchain": "nightly-2024-04-24", "rust-host": "aarch64-apple-darwin"}),
    ("rustc 1.79.0-nightly (244da22fa 2024-04-23)", {"rust-channel": "nightly", "rust-commit-date": "2024-04-23"}),
    ("Cuda compilation tools, release 12.4, V12.4.131", {"cuda-version": "12.4"}),
    ("/usr/local/cuda-11.6/bin/nvcc -gencode arch=compute_80,code=sm_80 -c k.cu",
     {"cuda-version": "11.6", "cuda-arch": "sm_80"}),
    # a Makefile's escaped quotes
    ('/opt/cuda/bin/nvcc -O2 -gencode=arch=compute_35,code=\\"sm_35,compute_35\\" -c k.cu', {"cuda-arch": "sm_35"}),
    ("0.\tProgram arguments: iree-compile m.mlir --iree-hal-target-device=local -o m.vmfb",
     {"iree-compile-flags": "iree-compile m.mlir --iree-hal-target-device=local -o m.vmfb"}),
    ("buildtools/linux-x64/rust/bin/rustc --crate-name vte", {"os": "linux", "cpu": "x86_64"}),
    ("  /Users/demanouwamo/Downloads/pytorch/build/caffe2/CMakeFiles/x.cu.o", {"os": "macos"}),
    ("  C:\\py\\Lib\\site-packages\\iree\\compiler\\_mlir_libs\\iree-compile.exe m.mlir"
     " --iree-hal-target-backends=llvm-cpu",
     {"iree-compile-flags": "\\iree-compile.exe m.mlir --iree-hal-target-backends=llvm-cpu"}),
    ("error: mhlo to TFLite legalization failed.", {"mlir-tool": "tflite-converter"}),
    ("-- Found CUDA: /usr/local/cuda (found version \"8.0\") ", {"cuda-version": "8.0"}),
    ("/usr/local/cuda-9.0/bin/nvcc -M -D__CUDACC__ k.cu", {"cuda-version": "9.0"}),
    ("1 error(s) generated when compiling for gfx906.", {"gpu-runtime": "hip"}),
    ("1 error generated when compiling for gfx803.", {"gpu-runtime": "hip"}),
    ("/home/u/rocm/rocm-4.0.1/bin/hipcc -c k.cpp", {"gpu-runtime": "hip"}),
    # a ROCm run that prints CUDA's words: ggml's device list, a PyTorch ROCm wheel's version
    ("ggml_cuda_init: found 1 ROCm devices:", {"gpu-runtime": "hip"}),
    ("PyTorch version: 2.1.0+rocm5.6", {"gpu-runtime": "hip"}),
    # a PyTorch build for Intel GPUs (intel/torch-xpu-ops#4127)
    ("torch                        2.13.0.dev20260607+xpu", {"gpu-runtime": "xpu"}),
    ("Is XPU available: True", {"gpu-runtime": "xpu"}),
    # upstream MLIR's own driver and Intel's IMEX: not IREE's pipeline
    ("mlir-opt -convert-spirv-to-llvm test.mlir", {"mlir-tool": "other-mlir"}),
    ("`bin/imex-opt -imex-convert-gpu-to-spirv` on the below IR fails", {"mlir-tool": "other-mlir"}),
    # CIRCT's SystemVerilog front end and its dialects (llvm/circt#7472, #10185)
    ("dff.sv:6:18: error: failed to legalize operation 'moore.variable'", {"mlir-tool": "other-mlir"}),
    ("circt-verilog --ir-hw minimal_testcase.sv | arcilator", {"mlir-tool": "other-mlir"}),
    # HEIR's secret dialect and TensorFlow's kernel generator (google/heir#2669, tensorflow/tensorflow#43556)
    ("}) {secret.kernel = #secret.kernel<name = \"MatmulDiagonal\", force = false>} : (tensor<1x784xf32>)",
     {"mlir-tool": "other-mlir"}),
    ("E tensorflow/compiler/mlir/tools/kernel_gen/tf_to_gpu_binary.cc:95] Internal: Lowering to GPU kernels failed.",
     {"mlir-tool": "other-mlir"}),
    # torch-mlir's own pipeline, run by torch-mlir-opt or an older SHARK importer before any IREE step
    ("torch-mlir-opt -pass-pipeline='builtin.module(torchdynamo-export-to-torch-backend-pipeline)' t.mlir",
     {"mlir-tool": "torch-mlir"}),
    ("./projects/pt1/tools/e2e_test.sh -c onnx_tosa --filter ElementwiseAtenLogicalAndOpModule_basic -v",
     {"mlir-tool": "torch-mlir"}),
    ("Platform 'METAL' is experimental and not all JAX functionality may be correctly supported!",
     {"mlir-tool": "other-mlir"}),
    ("error: failed to legalize operation 'amdgpu.instruction_sched_hint' that was explicitly marked illegal",
     {"mlir-tool": "triton"}),
    ("error: failed to legalize operation 'eltwise.round'", {"mlir-tool": "other-mlir"}),
    # Mojo's compiler lowering its own KGEN dialect (modular/modular#4961, #503)
    ("/home/u/error.mojo:4:8: error: failed to legalize operation 'kgen.func' that was explicitly marked illegal",
     {"mlir-tool": "other-mlir"}),
    ("i get error: failed to legalize operation 'kgen.param.constant' that was explicitly maked illegal",
     {"mlir-tool": "other-mlir"}),
    ('  File "/home/u/SHARK/shark/torch_mlir_utils.py", line 136, in get_torch_mlir_module',
     {"mlir-tool": "torch-mlir"}),
    ("-- The CXX compiler identification is AppleClang 15.0.0.15000309", {"os": "macos"}),
    # nvidia-smi's CSV query, the name first (wzqvip/jetson-pytorch-builder#1)
    ("name, compute_cap, driver_version\nNVIDIA GeForce RTX 3090, 8.6, 550.54.14", {"gpu-capability": "sm_86"}),
    # WSL: its kernels (microsoft/WSL#5554, #6014, #8174), the Windows driver's libraries, a /mnt/c path
    ("Error! Your kernel headers for kernel 4.4.0-19041-Microsoft cannot be found.", {"wsl": "wsl1"}),
    ("Linux version 4.19.128-microsoft-standard (oe-user@oe-host) (gcc version 8.2.0 (GCC)) #1 SMP",
     {"wsl": "wsl2"}),
    ("OS                           : Linux-5.10.16.3-microsoft-standard-WSL2-x86_64-with-glibc2.10",
     {"wsl": "wsl2"}),
    ("ldconfig: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link", {"wsl": "wsl2"}),
    ("CUDA error 100 at /mnt/c/ws/ai/llama/llama.cpp/ggml-cuda.cu:485: no CUDA-capable device is detected",
     {"wsl": "wsl"}),
    # ZLUDA: CUDA programs on AMD GPUs (patientx/ComfyUI-Zluda#214, lshqqytiger/ZLUDA#81)
    (":: Using ZLUDA with device: AMD Radeon RX 7900 XT [ZLUDA]", {"gpu-runtime": "zluda"}),
    (r'  File "P:\ComfyUI-ZLUDA\comfy\model_management.py", line 900, in cast_to',
     {"gpu-runtime": "zluda"}),
    # cargo's resolver on the sparse index adds the vendoring hint (rust-lang/cargo#12802): cargo 1.68 or newer
    ("location searched: crates.io index\nrequired by package `app v0.1.0 (/w/app)`\n"
     "perhaps a crate was updated and forgotten to be re-vendored?", {"cargo-min-version": "1.68.0"}),
])
def test_extractors_read_the_facts_of_a_line(line: str, facts: dict[str, str]) -> None:
    found = facts_of(line.encode() + b"\n")
    assert {fact: found[fact].value for fact in facts if fact in found} == facts
    assert all(found[fact].line == 1 and found[fact].source == "log" for fact in facts)


def test_the_failing_arch_pass_outweighs_the_arch_flags() -> None:
    # nvcc names the pass that failed in its intermediate file (cbuchner1/ccminer#5)
    log = (b'nvcc -gencode=arch=compute_20,code=\\"sm_20\\" -gencode=arch=compute_35,code=\\"sm_35\\" -c k.cu\n'
           b'k.cu(117): error: identifier "__shfl_up" is undefined\n'
           b'2 errors detected in the compilation of "/tmp/tmpxft_00007fe7_00000000-13_k.compute_20.cpp1.ii".\n')
    found = facts_of(log)
    assert (found["cuda-arch"].value, found["cuda-arch"].line) == ("sm_20", 3)


@pytest.mark.parametrize("line", [
    "-- Build files have been written to: C:/Users/runneradmin/work/app/build",  # CMake on Windows
    "/c/Users/runneradmin/work/app/build.sh: line 3: nvcc: command not found",  # Git Bash
    "  /mnt/c/Users/me/proj/k.cu(12): error: identifier is undefined",  # WSL
])
def test_a_windows_home_is_not_taken_for_macos(line: str) -> None:
    assert "os" not in facts_of(line.encode() + b"\n")


@pytest.mark.parametrize("line", [
    "  -v /mnt/b/code/glim/config:/glim/config koide3/glim_ros2:humble_cuda12.2",  # a native disk at /mnt/b
    "Linux runner 6.8.0-1017-azure #20-Ubuntu SMP x86_64 GNU/Linux",  # a runner's own kernel
    "zludaless build of the kernels",  # not the word
])
def test_native_linux_is_not_taken_for_wsl_or_zluda(line: str) -> None:
    found = facts_of(line.encode() + b"\n")
    assert "wsl" not in found and "gpu-runtime" not in found


@pytest.mark.parametrize("log", [
    # the Python API's CompilerToolError: the tool's name ends its line, the next is not a flag
    b"iree.compiler.tools.binaries.CompilerToolError: Error invoking IREE compiler tool iree-compile\n"
    b"Error code: 1\n",
    b"Program arguments: /opt/iree/bin/iree-compile\n #0 0x00007f0277889410 llvm::sys::PrintStackTrace\n",
])
def test_iree_flags_are_read_from_the_command_line_only(log: bytes) -> None:
    assert "iree-compile-flags" not in facts_of(log)


def test_iree_flags_of_the_invoked_with_line() -> None:
    log = (b"Error invoking IREE compiler tool iree-compile\nError code: 1\nInvoked with:\n"
           b" iree-compile /tmp/m.mlir --iree-input-type=tosa --iree-hal-target-backends=llvm-cpu\n")
    found = facts_of(log)["iree-compile-flags"]
    assert (found.value.split()[-1], found.line) == ("--iree-hal-target-backends=llvm-cpu", 4)
