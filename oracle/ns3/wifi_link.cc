// mprig's ns-3 oracle for the Wi-Fi channel model (mprig/wifi.py; issue 16 part 1).
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
// Build: make ns3-oracle (Debian libns3-dev 3.37). Usage: wifi_link --help.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

struct Options
{
    std::string standard = "11g"; // 11g or 11b
    std::string manager = "constant"; // constant, ideal, minstrel
    double rateMbit = 54;             // PHY rate of the constant manager
    std::string distances = "10,20,30,40,50,60,70,80,90,100";
    double exponent = 2.2;             // log-distance path loss exponent
    double referenceLoss = 46.6777;    // dB at 1 m (ns-3's default; seed 003 quotes 46.67)
    bool nakagami = true;              // Nakagami fading on top of the path loss
    std::string errorModel = "nist";   // nist or yans
    bool shortSlot = false;            // 9 us ERP slot; the papers' ns-3 had 20 us only
    bool preambleDetection = true;     // ns-3.37's threshold model (-82 dBm, 4 dB); the
                                       // papers' ns-3 had none
    uint32_t payload = 1400;           // TCP segment size (the papers' packet size)
    double warmup = 1.0;               // seconds of TCP before goodput is counted
    double measure = 5.0;              // seconds over which goodput is counted
    uint32_t runs = 3;                 // repetitions (RngRun 1..runs) per distance
    bool header = true;                // print the CSV header first
};

// Counters of one device's data MPDUs: frames of at least `minBytes` (TCP segments on the
// AP, TCP ACKs on the station are counted with minBytes 0 and a maxBytes).
struct MacCounters
{
    uint32_t minBytes = 0;
    uint32_t maxBytes = 1u << 30;
    uint64_t acked = 0;       // MPDUs acknowledged by the receiver
    uint64_t failed = 0;      // failed attempts (ACK timeout), final ones included
    uint64_t finalFailed = 0; // MPDUs dropped after the retry limit
    double rateSum = 0;       // sum of PHY rates (Mbit/s) of transmitted data frames
    uint64_t txFrames = 0;    // transmitted data frames (attempts seen by the PHY)
    bool counting = false;    // only inside the measurement window

    bool Matches(uint32_t size) const { return size >= minBytes && size <= maxBytes; }
};

void
OnAcked(MacCounters* c, Ptr<const WifiMpdu> mpdu)
{
    if (c->counting && mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->acked++;
    }
}

void
OnDropped(MacCounters* c, WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu)
{
    if (c->counting && reason == WIFI_MAC_DROP_REACHED_RETRY_LIMIT &&
        mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->finalFailed++;
    }
}

void
OnTimeout(MacCounters* c, uint8_t /*reason*/, Ptr<const WifiMpdu> mpdu, const WifiTxVector&)
{
    if (c->counting && mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->failed++;
    }
}

void
OnSnifferTx(MacCounters* c,
            Ptr<const Packet> packet,
            uint16_t,
            WifiTxVector txVector,
            MpduInfo,
            uint16_t)
{
    WifiMacHeader hdr;
    packet->PeekHeader(hdr);
    if (c->counting && hdr.IsData() && c->Matches(packet->GetSize()))
    {
        c->rateSum += txVector.GetMode().GetDataRate(txVector) / 1e6;
        c->txFrames++;
    }
}

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

std::string
ModeName(const Options& o)
{
    std::ostringstream name;
    if (o.standard == "11b")
    {
        name << "DsssRate" << o.rateMbit << "Mbps";
    }
    else
    {
        name << "ErpOfdmRate" << o.rateMbit << "Mbps";
    }
    return name.str();
}

void
SetRateManager(WifiHelper& wifi, const Options& o)
{
    if (o.manager == "constant")
    {
        std::string control = o.standard == "11b" ? "DsssRate1Mbps" : "ErpOfdmRate6Mbps";
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                     "DataMode",
                                     StringValue(ModeName(o)),
                                     "ControlMode",
                                     StringValue(control));
    }
    else if (o.manager == "ideal")
    {
        wifi.SetRemoteStationManager("ns3::IdealWifiManager");
    }
    else if (o.manager == "minstrel")
    {
        wifi.SetRemoteStationManager("ns3::MinstrelWifiManager");
    }
    else
    {
        NS_FATAL_ERROR("unknown --manager " << o.manager << " (constant, ideal, minstrel)");
    }
}

NetDeviceContainer
BuildWifi(const Options& o, NodeContainer sta, NodeContainer ap)
{
    YansWifiChannelHelper channel;
    channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel");
    channel.AddPropagationLoss("ns3::LogDistancePropagationLossModel",
                               "Exponent",
                               DoubleValue(o.exponent),
                               "ReferenceDistance",
                               DoubleValue(1.0),
                               "ReferenceLoss",
                               DoubleValue(o.referenceLoss));
    if (o.nakagami)
    {
        channel.AddPropagationLoss("ns3::NakagamiPropagationLossModel");
    }
    Ptr<YansWifiChannel> medium = channel.Create();
    // Fixed stream numbers for the fading and the MAC's backoffs; other draws still follow
    // the process's history, so a point re-run alone differs a little from the same point
    // in a sweep: re-run the whole command heading a committed CSV.
    channel.AssignStreams(medium, 1000);
    YansWifiPhyHelper phy;
    phy.SetChannel(medium);
    if (!o.preambleDetection)
    {
        phy.DisablePreambleDetectionModel();
    }
    phy.SetErrorRateModel(o.errorModel == "yans" ? "ns3::YansErrorRateModel"
                                                 : "ns3::NistErrorRateModel");
    WifiHelper wifi;
    wifi.SetStandard(o.standard == "11b" ? WIFI_STANDARD_80211b : WIFI_STANDARD_80211g);
    SetRateManager(wifi, o);
    WifiMacHelper mac;
    Ssid ssid("mprig-oracle");
    mac.SetType("ns3::StaWifiMac",
                "Ssid",
                SsidValue(ssid),
                "ShortSlotTimeSupported",
                BooleanValue(o.shortSlot));
    NetDeviceContainer devices = wifi.Install(phy, mac, sta);
    mac.SetType("ns3::ApWifiMac",
                "Ssid",
                SsidValue(ssid),
                "ShortSlotTimeSupported",
                BooleanValue(o.shortSlot));
    devices.Add(wifi.Install(phy, mac, ap));
    wifi.AssignStreams(devices, 2000);
    return devices; // [0] station, [1] AP
}

void
Track(Ptr<NetDevice> device, MacCounters* c)
{
    Ptr<WifiNetDevice> wifi = DynamicCast<WifiNetDevice>(device);
    Ptr<WifiMac> mac = wifi->GetMac();
    mac->TraceConnectWithoutContext("AckedMpdu", MakeBoundCallback(&OnAcked, c));
    mac->TraceConnectWithoutContext("DroppedMpdu", MakeBoundCallback(&OnDropped, c));
    mac->TraceConnectWithoutContext("MpduResponseTimeout", MakeBoundCallback(&OnTimeout, c));
    wifi->GetPhy()->TraceConnectWithoutContext("MonitorSnifferTx",
                                               MakeBoundCallback(&OnSnifferTx, c));
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
    std::cout << o.standard << "," << o.manager << "," << (o.manager == "constant" ? o.rateMbit : 0)
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
    NetDeviceContainer wifiDevices = BuildWifi(o, sta, ap);

    MobilityHelper mobility;
    Ptr<ListPositionAllocator> positions = CreateObject<ListPositionAllocator>();
    positions->Add(Vector(distance, 0, 0)); // station
    positions->Add(Vector(0, 0, 0));        // AP
    mobility.SetPositionAllocator(positions);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(NodeContainer(sta, ap));

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
    Track(wifiDevices.Get(1), &data);
    Track(wifiDevices.Get(0), &acks);

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
    cmd.AddValue("standard", "11g or 11b", o.standard);
    cmd.AddValue("manager", "rate manager: constant, ideal, minstrel", o.manager);
    cmd.AddValue("rate", "PHY rate (Mbit/s) of the constant manager", o.rateMbit);
    cmd.AddValue("distances", "comma-separated distances (m)", o.distances);
    cmd.AddValue("exponent", "log-distance path loss exponent", o.exponent);
    cmd.AddValue("referenceLoss", "path loss at 1 m (dB)", o.referenceLoss);
    cmd.AddValue("nakagami", "Nakagami fading (ns-3 defaults)", o.nakagami);
    cmd.AddValue("errorModel", "nist or yans", o.errorModel);
    cmd.AddValue("preambleDetection",
                 "ns-3's threshold preamble detection (-82 dBm, 4 dB)",
                 o.preambleDetection);
    cmd.AddValue("shortSlot", "allow the 9 us ERP short slot", o.shortSlot);
    cmd.AddValue("payload", "TCP segment size (bytes)", o.payload);
    cmd.AddValue("warmup", "seconds of traffic before counting", o.warmup);
    cmd.AddValue("measure", "seconds counted", o.measure);
    cmd.AddValue("runs", "repetitions per distance (RngRun 1..runs)", o.runs);
    cmd.AddValue("header", "print the CSV header", o.header);
    cmd.Parse(argc, argv);

    // The papers' TCP: an ACK for every segment (no delayed ACK), 1400 B segments, buffers
    // large enough that the window never limits a Wi-Fi link.
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(o.payload));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
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
