/* Userspace stand-in for libbpf's bpf_core_read.h: CO-RE reads are plain reads. */
#ifndef SHIM_BPF_CORE_READ_H
#define SHIM_BPF_CORE_READ_H
#define BPF_CORE_READ_BITFIELD(s, field) ((s)->field)
#define bpf_core_read(dst, sz, src) (memcpy((dst), (src), (sz)), 0)
#endif
