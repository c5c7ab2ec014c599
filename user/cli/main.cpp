// pspxdp: precise software pacing with eBPF and AF_XDP.
#include "cli/command.hpp"
#include "cli/completion.hpp"
#include "common/libbpf_log.hpp"
#include "common/ns.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>

using namespace pspxdp::cli;

static void usage(FILE *out) {
    std::fprintf(out, "Usage: pspxdp COMMAND [OPTIONS]\n\n"
                      "Paces egress traffic per class, to the byte, by filling every idle moment\n"
                      "of the wire with an IEEE 802.3x PAUSE frame of exactly the right length.\n\n"
                      "Commands:\n");
    for (const Command *c : commands())
        if (c->summary[0] != '(') std::fprintf(out, "  %-10s %s\n", c->name, c->summary);
    std::fprintf(out, "\nRun 'pspxdp COMMAND --help' for a command's options, 'man pspxdp' for "
                      "all of them.\n'pspxdp --version' prints the version.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const std::string_view first = argv[1];
    if (first == "-h" || first == "--help" || first == "help") {
        usage(stdout);
        return 0;
    }
    if (first == "-V" || first == "--version" || first == "version") {
        // The revision: which commit a bug report is about (cmake/git_revision.cmake).
        std::printf("%s (git %s)\n", version_string().c_str(), PSPXDP_GIT_REVISION);
        return 0;
    }
    if (first == "completion") { // hidden, as --man: the build writes the bash completion with it
        if (argc != 3 || std::string_view(argv[2]) != "bash") {
            std::fprintf(stderr, "pspxdp completion: usage: pspxdp completion bash\n");
            return 2;
        }
        print_bash_completion(stdout);
        return 0;
    }
    if (first == "--man") { // the build writes pspxdp.8 with this
        print_man_page(stdout);
        return 0;
    }
    for (const Command *c : commands()) {
        if (first != c->name) continue;
        auto args = parse_args(*c, argc - 2, argv + 2);
        if (!args) {
            std::fprintf(stderr, "pspxdp %s: %s\n", c->name, args.error().c_str());
            return 2;
        }
        if (args->help) {
            print_command_help(*c, stdout);
            return 0;
        }
        pspxdp::common::install_libbpf_printer();
        // Pins and run files are the host's: under `ip netns exec` (a private
        // mount namespace) use PID 1's mounts, keeping the network namespace.
        // simulate and analyze touch neither.
        if (c != &kSimulate && c != &kAnalyze) {
            auto r = pspxdp::common::enter_host_mount_ns();
            if (!r) {
                std::fprintf(stderr, "pspxdp %s: %s\n", c->name, r.error().c_str());
                return 1;
            }
        }
        try {
            return c->run(*args);
        } catch (const std::logic_error &e) { // a command asked for an option it did not declare
            std::fprintf(stderr, "pspxdp %s: internal error: %s\n", c->name, e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "pspxdp: unknown command \"%s\" (see pspxdp --help)\n", argv[1]);
    return 2;
}
