/* Userspace stand-in for libbpf's bpf_tracing.h: BPF_PROG(name, args) is name(args). */
#ifndef SHIM_BPF_TRACING_H
#define SHIM_BPF_TRACING_H
#define BPF_PROG(name, args...) name(args)
#endif
