// The delay line's queue (lab/psp_delay.cpp): a FIFO of frames, each with
// its due time, in one fixed byte buffer. First in, first out by
// construction (a delay line must never reorder); memory is the buffer given
// at construction and never grows; a frame that does not fit is refused
// (the caller counts it) instead of displacing one already queued.
// Pure: no clock, no syscall, unit-tested in tests/unit/test_delay_queue.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace pspxdp::lab {

class DelayQueue {
  public:
    struct Frame {
        uint64_t due_ns;
        std::span<const uint8_t> bytes;
    };

    // capacity_bytes: the whole buffer, record headers included (16 B per
    // frame, lengths rounded up to 8). max_frame_bytes bounds one frame.
    DelayQueue(size_t capacity_bytes, size_t max_frame_bytes)
        : buf_(round8(capacity_bytes)), max_frame_(max_frame_bytes) {}

    // False when the frame is longer than max_frame_bytes or does not fit.
    bool push(uint64_t due_ns, std::span<const uint8_t> frame) {
        if (frame.size() > max_frame_ || frame.empty()) return false;
        const size_t need = kHeader + round8(frame.size());
        size_t at = tail_;
        if (frames_ == 0) {
            head_ = tail_ = at = 0; // empty: start over at the front
        } else if (tail_ > head_) {
            // [head, tail) used; free space is [tail, end) and [0, head).
            if (buf_.size() - tail_ < need) {
                if (head_ < need) return false;
                wrap_ = tail_; // the tail's rest is skipped
                at = 0;
            }
        } else if (head_ - tail_ < need) {
            return false; // wrapped: free space is [tail, head); tail == head is full
        }
        if (at + need > buf_.size()) return false;
        Header h{due_ns, uint32_t(frame.size()), 0};
        std::memcpy(&buf_[at], &h, kHeader);
        std::memcpy(&buf_[at + kHeader], frame.data(), frame.size());
        tail_ = at + need;
        used_ += need;
        ++frames_;
        return true;
    }

    bool empty() const { return frames_ == 0; }
    size_t frames() const { return frames_; }
    size_t used_bytes() const { return used_; }
    size_t capacity_bytes() const { return buf_.size(); }

    Frame front() const {
        Header h;
        std::memcpy(&h, &buf_[head_], kHeader);
        return Frame{h.due_ns, std::span<const uint8_t>(&buf_[head_ + kHeader], h.len)};
    }

    void pop() {
        Header h;
        std::memcpy(&h, &buf_[head_], kHeader);
        const size_t n = kHeader + round8(h.len);
        head_ += n;
        used_ -= n;
        --frames_;
        if (frames_ == 0) {
            head_ = tail_ = 0;
            wrap_ = 0;
        } else if (wrap_ && head_ == wrap_) {
            head_ = 0; // skip the unused rest of the buffer
            wrap_ = 0;
        }
    }

  private:
    struct Header {
        uint64_t due_ns;
        uint32_t len;
        uint32_t pad;
    };
    static constexpr size_t kHeader = sizeof(Header);
    static_assert(kHeader == 16);
    static size_t round8(size_t n) { return (n + 7) & ~size_t(7); }

    std::vector<uint8_t> buf_;
    size_t max_frame_;
    size_t head_ = 0, tail_ = 0, wrap_ = 0, used_ = 0, frames_ = 0;
};

} // namespace pspxdp::lab
