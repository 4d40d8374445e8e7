# LibTorch from the PyPI torch wheel (scripts/bootstrap installs it; scripts/build passes
# torch.utils.cmake_prefix_path as CMAKE_PREFIX_PATH).
#
# The wheel's CUDA, cuDNN and NCCL libraries live in site-packages/nvidia/*/lib and libtorch_cuda.so
# carries no RUNPATH to them (Python preloads them). The machine's own CUDA (/usr/local/cuda, 13.0)
# is older than the wheel's (13.2) and its NCCL lacks symbols torch needs, so the binaries get an
# old-style DT_RPATH (inherited by libtorch's own dependencies) listing torch/lib and the wheel's
# nvidia dirs, and nothing from /usr/local/cuda.

# No GPU here: give the CUDA architectures instead of letting Caffe2's CMake probe for GPUs
# (its probe fails with CMake 3.25 + nvcc 13). Ampere and Hopper, the GPUs Meshwork targets.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()
find_package(Torch REQUIRED)

get_filename_component(MESHWORK_TORCH_LIB_DIR "${TORCH_INSTALL_PREFIX}/lib" ABSOLUTE)
get_filename_component(_site_packages "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
file(GLOB MESHWORK_TORCH_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${_site_packages}/nvidia/*/lib")
set(MESHWORK_TORCH_RPATH ${MESHWORK_TORCH_LIB_DIR} ${MESHWORK_TORCH_NVIDIA_LIB_DIRS})
list(JOIN MESHWORK_TORCH_RPATH ":" _rpath)
message(STATUS "Meshwork: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# One precompiled header for every LibTorch translation unit (~20 s -> ~11 s per unit here).
set(MESHWORK_TORCH_PCH ${CMAKE_SOURCE_DIR}/trainer/torch_pch.h)

function(meshwork_use_torch target)
  target_link_libraries(${target} PRIVATE ${TORCH_LIBRARIES})
  target_compile_options(${target} PRIVATE ${TORCH_CXX_FLAGS})
  set_target_properties(${target} PROPERTIES SKIP_BUILD_RPATH ON)
  target_link_options(${target} PRIVATE "LINKER:--disable-new-dtags" "LINKER:-rpath,${_rpath}")
endfunction()
