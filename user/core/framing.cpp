// The PAUSE gap frame. See framing.hpp.
#include "core/framing.hpp"

#include <cstring>
#include <string>

namespace pspxdp {

namespace {

// 802.3x reserves this multicast address for MAC control: a switch port
// consumes frames sent to it instead of forwarding them, which is what makes
// a PAUSE frame a gap that never travels past the first hop.
constexpr uint8_t kPauseDst[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
constexpr uint16_t kPauseOpcode = 0x0001;
constexpr uint32_t kPauseHeaderBytes = 18; // dst, src, ethertype, opcode, pause time

} // namespace

Result<std::vector<uint8_t>> build_pause_frame(const MacAddr &src_mac, uint32_t len,
                                               const Framing &framing) {
    uint32_t min_len = std::max(framing.min_frame_bytes, kPauseHeaderBytes);
    uint32_t max_len = framing.max_frame_len();
    if (len < min_len || len > max_len)
        return err("PAUSE frame of " + std::to_string(len) + " bytes: length must be in [" +
                   std::to_string(min_len) + ", " + std::to_string(max_len) + "]");
    std::vector<uint8_t> frame(len, 0); // zero padding after the pause time
    std::memcpy(frame.data(), kPauseDst, 6);
    std::memcpy(frame.data() + 6, src_mac.data(), 6);
    frame[12] = uint8_t(kEthPPause >> 8);
    frame[13] = uint8_t(kEthPPause & 0xff);
    frame[14] = uint8_t(kPauseOpcode >> 8);
    frame[15] = uint8_t(kPauseOpcode & 0xff);
    // Pause time 0 (bytes 16-17): "resume now", so a switch that honours it
    // never actually stops the port.
    return frame;
}

bool is_pause_frame(const uint8_t *frame, uint32_t len) {
    if (!frame || len < 16) return false;
    return std::memcmp(frame, kPauseDst, 6) == 0 && frame[12] == uint8_t(kEthPPause >> 8) &&
           frame[13] == uint8_t(kEthPPause & 0xff) && frame[14] == uint8_t(kPauseOpcode >> 8) &&
           frame[15] == uint8_t(kPauseOpcode & 0xff);
}

} // namespace pspxdp
