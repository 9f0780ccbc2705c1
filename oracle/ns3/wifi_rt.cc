// mprig's real-time ns-3 link engine (issue 16 parts 3-4): one 802.11 link between two
// network namespaces, in real time.
//
// The client's end of a path (a TAP device in the client namespace) is the station's wired
// side, the router's end (a TAP device in the router namespace, where this program runs) is
// the AP's. Frames the kernels send into the TAPs are read by FdNetDevices and cross the
// simulated 802.11 link (wifi_setup.h: the oracle's channel, PHY, rate manager and MAC) as
// the station's and the AP's own data frames; on the far side they are written into the
// other TAP with the Ethernet addresses of the two kernel interfaces, so the kernels see one
// plain Ethernet link whose frames took the MAC's contention, retries and rate adaptation.
//
// The simulator is ns-3's RealtimeSimulatorImpl (best effort). A sampler event every
// --sampleMs compares the wall clock with the simulation clock; the difference is how late
// the simulator runs (its lag). On SIGTERM or SIGINT the program stops and prints one line
// `mprig-engine {json}`: lag maximum and 95th percentile, packets per direction, MAC counts.
// It prints `mprig-engine ready` once the station is associated.
//
// Build: make ns3-engine (Debian libns3-dev 3.37). Usage: wifi_rt --help.

#include "ns3/core-module.h"
#include "ns3/fd-net-device-module.h"
#include "ns3/network-module.h"
#include "ns3/realtime-simulator-impl.h"
#include "ns3/wifi-module.h"
#include "wifi_setup.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <vector>

using namespace ns3;

namespace
{

struct Options
{
    mprig::WifiChannel wifi;  // channel, PHY and rate manager (wifi_setup.h)
    double distance = 10;     // metres between station and AP
    uint64_t seed = 1;        // ns-3 RngRun (the run's seed)
    std::string clientNetns;  // /run/netns/<client namespace>
    std::string clientTap;    // TAP device in the client namespace (station side)
    std::string routerTap;    // TAP device in this process's namespace (AP side)
    std::string clientMac;    // Ethernet address of clientTap (as the kernel has it)
    std::string routerMac;    // Ethernet address of routerTap
    double sampleMs = 1.0;    // lag sampling period (simulation time)
};

volatile std::sig_atomic_t g_stop = 0;

void
OnSignal(int)
{
    g_stop = 1;
}

int
OpenTap(const std::string& name)
{
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0)
    {
        NS_FATAL_ERROR("open /dev/net/tun: " << std::strerror(errno));
    }
    struct ifreq ifr;
    std::memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
    {
        NS_FATAL_ERROR("TUNSETIFF " << name << ": " << std::strerror(errno));
    }
    return fd;
}

// A TAP of another namespace: enter it, attach, come back (the fd stays bound to the device).
int
OpenTapIn(const std::string& netns, const std::string& name)
{
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int there = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (home < 0 || there < 0 || setns(there, CLONE_NEWNET) < 0)
    {
        NS_FATAL_ERROR("enter " << netns << ": " << std::strerror(errno));
    }
    int fd = OpenTap(name);
    if (setns(home, CLONE_NEWNET) < 0)
    {
        NS_FATAL_ERROR("return from " << netns << ": " << std::strerror(errno));
    }
    close(home);
    close(there);
    return fd;
}

struct Stats
{
    uint64_t clientIn = 0;  // frames read from the client's TAP (upload side)
    uint64_t routerOut = 0; // of them, written into the router's TAP
    uint64_t routerIn = 0;  // frames read from the router's TAP (download side)
    uint64_t clientOut = 0; // of them, written into the client's TAP
    std::vector<double> lagMs;
    mprig::MacCounters down; // the AP's data MPDUs
    mprig::MacCounters up;   // the station's data MPDUs
};

Stats g_stats;

bool
IsGroup(NetDevice::PacketType type)
{
    return type == NetDevice::PACKET_BROADCAST || type == NetDevice::PACKET_MULTICAST;
}

// One direction of the pseudo-wire: frames entering at `in` leave at `out`.
struct Hop
{
    Ptr<NetDevice> out;    // device that sends the frame on
    Mac48Address unicast;  // destination of a unicast frame on `out`
    Mac48Address source;   // source written into a TAP (unused on the Wi-Fi side)
    bool toTap = false;    // `out` is an FdNetDevice (SendFrom) rather than Wi-Fi (Send)
    uint64_t* counter = nullptr;
};

void
Forward(Hop* hop,
        Ptr<NetDevice>,
        Ptr<const Packet> packet,
        uint16_t protocol,
        const Address&,
        const Address&,
        NetDevice::PacketType type)
{
    Mac48Address to = IsGroup(type) ? Mac48Address::GetBroadcast() : hop->unicast;
    bool sent = hop->toTap ? hop->out->SendFrom(packet->Copy(), hop->source, to, protocol)
                           : hop->out->Send(packet->Copy(), to, protocol);
    if (sent && hop->counter)
    {
        (*hop->counter)++;
    }
}

void
Sample(Ptr<RealtimeSimulatorImpl> impl, Time period)
{
    g_stats.lagMs.push_back((impl->RealtimeNow() - Simulator::Now()).GetSeconds() * 1e3);
    if (g_stop)
    {
        Simulator::Stop();
        return;
    }
    Simulator::Schedule(period, &Sample, impl, period);
}

void
OnAssoc(Mac48Address)
{
    std::cout << "mprig-engine ready at " << Simulator::Now().GetSeconds() << " s" << std::endl;
}

Ptr<FdNetDevice>
TapDevice(Ptr<Node> node, int fd, const std::string& mac)
{
    FdNetDeviceHelper helper;
    Ptr<FdNetDevice> dev = DynamicCast<FdNetDevice>(helper.Install(node).Get(0));
    dev->SetFileDescriptor(fd);
    dev->SetAddress(Mac48Address(mac.c_str()));
    return dev;
}

void
Connect(Ptr<Node> node, Ptr<NetDevice> in, Hop* hop, bool promiscuous)
{
    node->RegisterProtocolHandler(MakeBoundCallback(&Forward, hop), 0, in, promiscuous);
}

double
Percentile(std::vector<double> v, double q)
{
    if (v.empty())
    {
        return 0;
    }
    std::sort(v.begin(), v.end());
    size_t i = std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5));
    return v[i];
}

std::string
MacJson(const mprig::MacCounters& c)
{
    std::ostringstream j;
    j << "{\"mpdus\": " << (c.acked + c.finalFailed) << ", \"failed_attempts\": " << c.failed
      << ", \"dropped\": " << c.finalFailed << ", \"mean_phy_rate_mbit\": "
      << (c.txFrames ? c.rateSum / c.txFrames : 0.0) << "}";
    return j.str();
}

void
PrintSummary()
{
    const Stats& s = g_stats;
    double max = s.lagMs.empty() ? 0 : *std::max_element(s.lagMs.begin(), s.lagMs.end());
    std::cout << "mprig-engine {\"lag_max_ms\": " << max
              << ", \"lag_p95_ms\": " << Percentile(s.lagMs, 0.95)
              << ", \"lag_p50_ms\": " << Percentile(s.lagMs, 0.5)
              << ", \"lag_samples\": " << s.lagMs.size()
              << ", \"sim_s\": " << Simulator::Now().GetSeconds()
              << ", \"packets\": {\"down_in\": " << s.routerIn << ", \"down_out\": " << s.clientOut
              << ", \"up_in\": " << s.clientIn << ", \"up_out\": " << s.routerOut << "}"
              << ", \"mac\": {\"down\": " << MacJson(s.down) << ", \"up\": " << MacJson(s.up)
              << "}}" << std::endl;
}

void
Run(const Options& o)
{
    GlobalValue::Bind("SimulatorImplementationType",
                      StringValue("ns3::RealtimeSimulatorImpl"));
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(o.seed);
    int clientFd = OpenTapIn(o.clientNetns, o.clientTap);
    int routerFd = OpenTap(o.routerTap);

    NodeContainer sta(1), ap(1);
    NetDeviceContainer wifi = mprig::BuildWifi(o.wifi, sta, ap);
    mprig::PlaceNodes(sta, ap, o.distance);
    Ptr<NetDevice> staWifi = wifi.Get(0), apWifi = wifi.Get(1);
    // Each TAP's FdNetDevice carries the address of the kernel interface at the far end.
    Ptr<FdNetDevice> clientDev = TapDevice(sta.Get(0), clientFd, o.routerMac);
    Ptr<FdNetDevice> routerDev = TapDevice(ap.Get(0), routerFd, o.clientMac);
    Mac48Address clientMac(o.clientMac.c_str()), routerMac(o.routerMac.c_str());

    static Hop upWifi{staWifi, Mac48Address::ConvertFrom(apWifi->GetAddress()), {}, false,
                      &g_stats.clientIn};
    static Hop upTap{routerDev, routerMac, clientMac, true, &g_stats.routerOut};
    static Hop downWifi{apWifi, Mac48Address::ConvertFrom(staWifi->GetAddress()), {}, false,
                        &g_stats.routerIn};
    static Hop downTap{clientDev, clientMac, routerMac, true, &g_stats.clientOut};
    Connect(sta.Get(0), clientDev, &upWifi, true);
    Connect(ap.Get(0), apWifi, &upTap, false);
    Connect(ap.Get(0), routerDev, &downWifi, true);
    Connect(sta.Get(0), staWifi, &downTap, false);

    g_stats.down.counting = g_stats.up.counting = true;
    mprig::Track(apWifi, &g_stats.down);
    mprig::Track(staWifi, &g_stats.up);
    DynamicCast<WifiNetDevice>(staWifi)->GetMac()->TraceConnectWithoutContext(
        "Assoc", MakeCallback(&OnAssoc));

    Ptr<RealtimeSimulatorImpl> impl =
        DynamicCast<RealtimeSimulatorImpl>(Simulator::GetImplementation());
    Time period = Seconds(o.sampleMs / 1e3);
    g_stats.lagMs.reserve(1 << 20);
    Simulator::Schedule(period, &Sample, impl, period);
    Simulator::Run();
    PrintSummary();
    Simulator::Destroy();
}

} // namespace

int
main(int argc, char* argv[])
{
    prctl(PR_SET_PDEATHSIG, SIGTERM); // the runner died: stop too (its teardown checks)
    std::signal(SIGTERM, OnSignal);
    std::signal(SIGINT, OnSignal);
    Options o;
    CommandLine cmd(__FILE__);
    mprig::AddChannelOptions(cmd, o.wifi);
    cmd.AddValue("distance", "metres between station and AP", o.distance);
    cmd.AddValue("seed", "ns-3 RngRun", o.seed);
    cmd.AddValue("clientNetns", "the client's namespace (/run/netns/<name>)", o.clientNetns);
    cmd.AddValue("clientTap", "TAP device in the client namespace", o.clientTap);
    cmd.AddValue("routerTap", "TAP device in this namespace (the router's)", o.routerTap);
    cmd.AddValue("clientMac", "Ethernet address of the client's TAP", o.clientMac);
    cmd.AddValue("routerMac", "Ethernet address of the router's TAP", o.routerMac);
    cmd.AddValue("sampleMs", "lag sampling period (ms)", o.sampleMs);
    cmd.Parse(argc, argv);
    if (o.clientNetns.empty() || o.clientTap.empty() || o.routerTap.empty() ||
        o.clientMac.empty() || o.routerMac.empty())
    {
        std::cerr << "wifi_rt: --clientNetns, --clientTap, --routerTap, --clientMac and "
                     "--routerMac are required"
                  << std::endl;
        return 2;
    }
    if (getppid() == 1)
    {
        return 1; // the parent is already gone
    }
    Run(o);
    return 0;
}
