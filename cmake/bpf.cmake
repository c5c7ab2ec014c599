# pspxdp_bpf_skeleton(NAME): builds bpf/NAME.bpf.c through Makefile.bpf and
# exposes the skeleton header NAME.skel.h as the INTERFACE target NAME_skel.
find_program(CLANG_BPF clang REQUIRED)
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
set(PSPXDP_BPF_OUT ${CMAKE_BINARY_DIR}/bpf)
file(GLOB PSPXDP_BPF_HEADERS ${PROJECT_SOURCE_DIR}/include/pspxdp/*.h ${PROJECT_SOURCE_DIR}/bpf/*.h)

function(pspxdp_bpf_skeleton name)
    set(obj ${PSPXDP_BPF_OUT}/${name}.bpf.o)
    set(skel ${PSPXDP_BPF_OUT}/${name}.skel.h)
    add_custom_command(
        OUTPUT ${obj} ${skel}
        COMMAND make --no-print-directory -f ${PROJECT_SOURCE_DIR}/Makefile.bpf
                OUT=${PSPXDP_BPF_OUT} NAME=${name} CLANG=${CLANG_BPF} BPFTOOL=${BPFTOOL}
        DEPENDS ${PROJECT_SOURCE_DIR}/bpf/${name}.bpf.c ${PSPXDP_BPF_HEADERS}
                ${PROJECT_SOURCE_DIR}/Makefile.bpf
        COMMENT "BPF ${name}.bpf.c -> ${name}.skel.h"
        VERBATIM)
    add_custom_target(${name}_skel_gen DEPENDS ${skel})
    add_library(${name}_skel INTERFACE)
    add_dependencies(${name}_skel ${name}_skel_gen)
    target_include_directories(${name}_skel INTERFACE ${PSPXDP_BPF_OUT})
endfunction()
