// The 802.11 link shared by mprig's ns-3 programs (issue 16): the oracle (wifi_link.cc, a
// pure simulation) and the real-time link engine (wifi_rt.cc, between two namespaces) build
// one AP and one station on the same channel, PHY, rate manager and MAC counters from here,
// so a real-time run and the oracle sweep it is compared with cannot drift apart.

#ifndef MPRIG_WIFI_SETUP_H
#define MPRIG_WIFI_SETUP_H

#include "ns3/core-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"

#include <sstream>
#include <string>

namespace mprig
{

using namespace ns3;

// The channel, PHY and rate manager of the link (command-line flags of both programs).
struct WifiChannel
{
    std::string standard = "11g"; // 11g or 11b
    std::string manager = "constant"; // constant, ideal, minstrel
    double rateMbit = 54;             // PHY rate of the constant manager
    double exponent = 2.2;            // log-distance path loss exponent
    double referenceLoss = 46.6777;   // dB at 1 m (ns-3's default; seed 003 quotes 46.67)
    bool nakagami = true;             // Nakagami fading on top of the path loss
    std::string errorModel = "nist";  // nist or yans
    bool shortSlot = false;           // 9 us ERP slot; the papers' ns-3 had 20 us only
    bool preambleDetection = true;    // ns-3.37's threshold model (-82 dBm, 4 dB); the
                                      // papers' ns-3 had none
};

inline void
AddChannelOptions(CommandLine& cmd, WifiChannel& c)
{
    cmd.AddValue("standard", "11g or 11b", c.standard);
    cmd.AddValue("manager", "rate manager: constant, ideal, minstrel", c.manager);
    cmd.AddValue("rate", "PHY rate (Mbit/s) of the constant manager", c.rateMbit);
    cmd.AddValue("exponent", "log-distance path loss exponent", c.exponent);
    cmd.AddValue("referenceLoss", "path loss at 1 m (dB)", c.referenceLoss);
    cmd.AddValue("nakagami", "Nakagami fading (ns-3 defaults)", c.nakagami);
    cmd.AddValue("errorModel", "nist or yans", c.errorModel);
    cmd.AddValue("preambleDetection",
                 "ns-3's threshold preamble detection (-82 dBm, 4 dB)",
                 c.preambleDetection);
    cmd.AddValue("shortSlot", "allow the 9 us ERP short slot", c.shortSlot);
}

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

inline void
OnAcked(MacCounters* c, Ptr<const WifiMpdu> mpdu)
{
    if (c->counting && mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->acked++;
    }
}

inline void
OnDropped(MacCounters* c, WifiMacDropReason reason, Ptr<const WifiMpdu> mpdu)
{
    if (c->counting && reason == WIFI_MAC_DROP_REACHED_RETRY_LIMIT &&
        mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->finalFailed++;
    }
}

inline void
OnTimeout(MacCounters* c, uint8_t /*reason*/, Ptr<const WifiMpdu> mpdu, const WifiTxVector&)
{
    if (c->counting && mpdu->GetHeader().IsData() && c->Matches(mpdu->GetSize()))
    {
        c->failed++;
    }
}

inline void
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

inline std::string
ModeName(const WifiChannel& o)
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

inline void
SetRateManager(WifiHelper& wifi, const WifiChannel& o)
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

inline NetDeviceContainer
BuildWifi(const WifiChannel& o, NodeContainer sta, NodeContainer ap)
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

// The station `distance` metres from the AP, neither moving.
inline void
PlaceNodes(NodeContainer sta, NodeContainer ap, double distance)
{
    MobilityHelper mobility;
    Ptr<ListPositionAllocator> positions = CreateObject<ListPositionAllocator>();
    positions->Add(Vector(distance, 0, 0)); // station
    positions->Add(Vector(0, 0, 0));        // AP
    mobility.SetPositionAllocator(positions);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(NodeContainer(sta, ap));
}

inline void
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

} // namespace mprig

#endif // MPRIG_WIFI_SETUP_H
