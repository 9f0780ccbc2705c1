// mprig's ns-3 oracle for the Wi-Fi channel model (mprig/campaign/wifi.py; issue 16 part 1).
//
// One AP, one station, a server behind the AP (100 Mbit/s, 10 ms point-to-point, as in the
// seeds' backbone), one bulk TCP download from the server to the station. The channel is
// log-distance path loss (reference loss at 1 m, exponent n), optionally Nakagami fading
// (ns-3 defaults: m = 1.5 below 80 m, 0.75 beyond), the NIST or YANS error-rate model, and a
// constant rate manager at one PHY rate or an adaptive one (Ideal, Minstrel).
//
// Prints one CSV row per distance and repetition: TCP goodput at the station, the MAC's
// delivery ratio and retries of the AP's data MPDUs (the TCP segments) and of the
// station's (the TCP ACKs), and the mean PHY rate of the AP's data frames.
//
// The link itself (channel, PHY, MAC, counters) is wifi_setup.h, shared with the real-time
// engine wifi_rt.cc. Build: make ns3-oracle (Debian libns3-dev 3.37). Usage: wifi_link --help.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"
#include "wifi_setup.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;
using mprig::MacCounters;

namespace
{

struct Options
{
    mprig::WifiChannel wifi; // channel, PHY and rate manager (wifi_setup.h)
    std::string distances = "10,20,30,40,50,60,70,80,90,100";
    uint32_t payload = 1400;           // TCP segment size (the papers' packet size)
    double warmup = 1.0;               // seconds of TCP before goodput is counted
    double measure = 5.0;              // seconds over which goodput is counted
    uint32_t runs = 3;                 // repetitions (RngRun 1..runs) per distance
    uint32_t delAck = 1;               // segments per TCP ACK (1: the papers'; Linux: 2)
    bool header = true;                // print the CSV header first
};

std::vector<double>
ParseDistances(const std::string& text)
{
    std::vector<double> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
    {
        out.push_back(std::stod(item));
    }
    return out;
}

void
StartCounting(MacCounters* a, MacCounters* b, Ptr<PacketSink> sink, uint64_t* base)
{
    a->counting = true;
    b->counting = true;
    *base = sink->GetTotalRx();
}

void
PrintRow(const Options& o, double d, uint32_t run, double goodput, const MacCounters& data,
         const MacCounters& acks)
{
    auto pdr = [](const MacCounters& c) {
        uint64_t done = c.acked + c.finalFailed;
        return done ? double(c.acked) / done : 0.0;
    };
    auto retries = [](const MacCounters& c) {
        uint64_t done = c.acked + c.finalFailed;
        return done ? double(c.failed) / done : 0.0;
    };
    const mprig::WifiChannel& w = o.wifi;
    std::cout << w.standard << "," << w.manager << "," << (w.manager == "constant" ? w.rateMbit : 0)
              << "," << d << "," << run << "," << goodput << "," << pdr(data) << ","
              << retries(data) << "," << (data.acked + data.finalFailed) << ","
              << data.finalFailed << ","
              << (data.txFrames ? data.rateSum / data.txFrames : 0.0) << "," << pdr(acks) << ","
              << retries(acks) << "," << (acks.acked + acks.finalFailed) << std::endl;
}

void
RunOnce(const Options& o, double distance, uint32_t run)
{
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(run);
    NodeContainer sta(1), ap(1), server(1);
    NetDeviceContainer wifiDevices = mprig::BuildWifi(o.wifi, sta, ap);
    mprig::PlaceNodes(sta, ap, distance);

    PointToPointHelper backbone;
    backbone.SetDeviceAttribute("DataRate", StringValue("100Mbps"));
    backbone.SetChannelAttribute("Delay", StringValue("10ms"));
    NetDeviceContainer wired = backbone.Install(server.Get(0), ap.Get(0));

    InternetStackHelper stack;
    stack.InstallAll();
    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.0.0", "255.255.255.0");
    Ipv4InterfaceContainer wifiIf = addresses.Assign(wifiDevices);
    addresses.SetBase("10.2.0.0", "255.255.255.0");
    addresses.Assign(wired);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    uint16_t port = 5001;
    BulkSendHelper source("ns3::TcpSocketFactory",
                          InetSocketAddress(wifiIf.GetAddress(0), port));
    source.SetAttribute("SendSize", UintegerValue(o.payload));
    source.Install(server.Get(0)).Start(Seconds(0.5));
    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinkApp = sinkHelper.Install(sta.Get(0));
    sinkApp.Start(Seconds(0.0));
    Ptr<PacketSink> sink = DynamicCast<PacketSink>(sinkApp.Get(0));

    MacCounters data; // AP -> station: TCP segments
    data.minBytes = o.payload;
    MacCounters acks; // station -> AP: TCP ACKs
    acks.maxBytes = 200;
    mprig::Track(wifiDevices.Get(1), &data);
    mprig::Track(wifiDevices.Get(0), &acks);

    double start = 0.5 + o.warmup;
    double stop = start + o.measure;
    uint64_t base = 0;
    Simulator::Schedule(Seconds(start), &StartCounting, &data, &acks, sink, &base);
    Simulator::Stop(Seconds(stop));
    Simulator::Run();
    double goodput = (sink->GetTotalRx() - base) * 8.0 / o.measure / 1e6;
    PrintRow(o, distance, run, goodput, data, acks);
    Simulator::Destroy();
}

} // namespace

int
main(int argc, char* argv[])
{
    Options o;
    CommandLine cmd(__FILE__);
    mprig::AddChannelOptions(cmd, o.wifi);
    cmd.AddValue("distances", "comma-separated distances (m)", o.distances);
    cmd.AddValue("payload", "TCP segment size (bytes)", o.payload);
    cmd.AddValue("warmup", "seconds of traffic before counting", o.warmup);
    cmd.AddValue("measure", "seconds counted", o.measure);
    cmd.AddValue("runs", "repetitions per distance (RngRun 1..runs)", o.runs);
    cmd.AddValue("header", "print the CSV header", o.header);
    cmd.AddValue("delAck", "segments per delayed TCP ACK (1 as the papers, 2 as Linux)", o.delAck);
    cmd.Parse(argc, argv);

    // The papers' TCP: an ACK for every segment (no delayed ACK), 1400 B segments, buffers
    // large enough that the window never limits a Wi-Fi link.
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(o.payload));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(o.delAck));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));

    if (o.header)
    {
        std::cout << "standard,manager,rate_mbit,distance_m,run,goodput_mbit,pdr,"
                     "retries_per_mpdu,mpdus,dropped,mean_phy_rate_mbit,ack_pdr,"
                     "ack_retries_per_mpdu,ack_mpdus"
                  << std::endl;
    }
    for (double d : ParseDistances(o.distances))
    {
        for (uint32_t run = 1; run <= o.runs; ++run)
        {
            RunOnce(o, d, run);
        }
    }
    return 0;
}
