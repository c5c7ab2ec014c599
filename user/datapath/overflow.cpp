#include "datapath/overflow.hpp"

#include <algorithm>

namespace pspxdp::datapath {

std::vector<Cut> plan_overflow(std::vector<Backlog> &b, uint64_t need) {
    std::vector<Cut> cuts;
    if (!need || b.empty()) return cuts;
    // Longest first; equal backlogs keep their input order.
    std::stable_sort(b.begin(), b.end(),
                     [](const Backlog &x, const Backlog &y) { return x.frames > y.frames; });
    // Bring the top k classes down to the next one's backlog until that frees
    // enough; the level lands between the k-th and the (k+1)-th backlog.
    uint64_t top = 0; // frames of the top k classes
    size_t k = 0;
    uint64_t level = 0;
    for (k = 1; k <= b.size(); ++k) {
        top += b[k - 1].frames;
        uint64_t next = k < b.size() ? b[k].frames : 0;
        if (top - k * next >= need) {
            level = (top - need) / k; // top - k * level >= need
            break;
        }
    }
    if (k > b.size()) { // need exceeds everything queued: all of it goes
        for (const auto &x : b)
            if (x.frames) cuts.push_back(Cut{x.id, x.frames});
        return cuts;
    }
    // Each of the top k keeps `level`; dropping to it frees
    // top - k * level >= need, so the first `spare` classes keep one more.
    uint64_t spare = top - k * level - need;
    for (size_t i = 0; i < k; ++i) {
        uint64_t keep = level + (i < spare ? 1 : 0);
        if (b[i].frames > keep) cuts.push_back(Cut{b[i].id, uint32_t(b[i].frames - keep)});
    }
    return cuts;
}

} // namespace pspxdp::datapath
