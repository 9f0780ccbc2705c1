/* Userspace stand-in for libbpf's bpf_helpers.h (see ../vmlinux.h): programs become plain
 * functions, maps small tables in bpfcc_sim.c, kfuncs the kernel's own code (tcp_cong.c). */
#ifndef SHIM_BPF_HELPERS_H
#define SHIM_BPF_HELPERS_H
#define SEC(name)
#define __ksym
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name

void *shim_map_lookup(void *map, const void *key, unsigned int ksize, unsigned int vsize);
long shim_map_update(void *map, const void *key, const void *value, unsigned int ksize,
		     unsigned int vsize, __u64 flags);
long shim_map_delete(void *map, const void *key, unsigned int ksize);
#define bpf_map_lookup_elem(m, k) shim_map_lookup((m), (k), sizeof(*(m)->key), sizeof(*(m)->value))
#define bpf_map_update_elem(m, k, v, flags)                                               \
	shim_map_update((m), (k), (v), sizeof(*(m)->key), sizeof(*(m)->value), (flags))
#define bpf_map_delete_elem(m, k) shim_map_delete((m), (k), sizeof(*(m)->key))

static inline long bpf_loop(__u32 n, long (*cb)(__u32, void *), void *ctx, __u64 flags)
{
	__u32 i;

	(void)flags;
	for (i = 0; i < n; i++)
		if (cb(i, ctx))
			return i + 1;
	return n;
}
#endif
