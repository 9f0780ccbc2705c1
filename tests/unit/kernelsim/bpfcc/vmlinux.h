/* Userspace stand-in for the vmlinux.h that mprig.bpfcc generates from kernel BTF: only the
 * types and fields the programs in kernel-configs/bpf touch, so the programs compile as ordinary C and
 * run against bpfcc_sim.c's model of the kernel's congestion-control call sites.
 * tcp_sock and inet_connection_sock are one struct with sock (the programs cast between
 * them, as the kernel's nested layout allows). */
#ifndef SHIM_VMLINUX_H
#define SHIM_VMLINUX_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef int32_t __s32;
typedef int64_t __s64;

#define tcp_sock sock
#define inet_connection_sock sock

enum tcp_ca_state { TCP_CA_Open, TCP_CA_Disorder, TCP_CA_CWR, TCP_CA_Recovery, TCP_CA_Loss };

enum tcp_ca_event {
	CA_EVENT_TX_START, CA_EVENT_CWND_RESTART, CA_EVENT_COMPLETE_CWR, CA_EVENT_LOSS,
	CA_EVENT_ECN_NO_CE, CA_EVENT_ECN_IS_CE,
};

struct sock {
	/* inet_connection_sock */
	__u8 icsk_ca_state;
	void *icsk_ulp_data;
	__u64 icsk_ca_priv[13];
	/* tcp_sock */
	__u32 snd_cwnd;
	__u32 snd_cwnd_cnt;
	__u32 snd_cwnd_clamp;
	__u32 snd_ssthresh;
	__u32 prior_cwnd;
	__u32 prior_ssthresh;
	__u32 srtt_us;
	__u32 max_packets_out;
	__u32 reord_seen;
	__u32 snd_una;
	__u64 tcp_mstamp;
	bool is_cwnd_limited;
	bool is_mptcp;
};

struct mptcp_subflow_context {
	struct sock *conn;
};

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
};

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, __u32 flags);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
	char name[16];
};

enum { BPF_MAP_TYPE_HASH = 1 };
enum { BPF_ANY = 0, BPF_NOEXIST = 1, BPF_EXIST = 2 };
#endif
