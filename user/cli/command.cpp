#include "cli/command.hpp"

#include <cstdio>
#include <cstring>

namespace pspxdp::cli {

static const Option *find_long(const Command &cmd, std::string_view name) {
    for (const auto &o : cmd.options)
        if (name == o.name) return &o;
    return nullptr;
}

static const Option *find_short(const Command &cmd, char c) {
    for (const auto &o : cmd.options)
        if (o.short_name && o.short_name == c) return &o;
    return nullptr;
}

Result<Args> parse_args(const Command &cmd, int argc, char **argv) {
    Args args;
    bool only_positional = false;
    for (int i = 0; i < argc; ++i) {
        std::string_view a = argv[i];
        if (only_positional || a.size() < 2 || a[0] != '-') {
            args.positional.emplace_back(a);
            continue;
        }
        if (a == "--") {
            only_positional = true;
            continue;
        }
        if (a == "-h" || a == "--help") {
            args.values["help"] = "";
            continue;
        }
        const Option *opt = nullptr;
        std::string value;
        bool inline_value = false;
        if (a.starts_with("--")) {
            std::string_view name = a.substr(2);
            if (auto eq = name.find('='); eq != std::string_view::npos) {
                value = std::string(name.substr(eq + 1));
                name = name.substr(0, eq);
                inline_value = true;
            }
            opt = find_long(cmd, name);
            if (!opt) return err("unknown option --" + std::string(name));
        } else {
            if (a.size() != 2) return err("unknown option " + std::string(a));
            opt = find_short(cmd, a[1]);
            if (!opt) return err("unknown option " + std::string(a));
        }
        if (opt->metavar) {
            if (!inline_value) {
                if (i + 1 >= argc) return err("option --" + std::string(opt->name) + " needs " + opt->metavar);
                value = argv[++i];
            }
        } else if (inline_value) {
            return err("option --" + std::string(opt->name) + " takes no value");
        }
        args.values[opt->name] = value;
        args.all_values[opt->name].push_back(value);
    }
    if (args.has("help")) return args;
    if (args.positional.size() < cmd.min_positional)
        return err(std::string("missing argument: usage: pspxdp ") + cmd.name + " " + cmd.usage);
    if (args.positional.size() > cmd.max_positional)
        return err("unexpected argument \"" + args.positional[cmd.max_positional] + "\"");
    return args;
}

void print_command_help(const Command &cmd, FILE *out) {
    std::fprintf(out, "Usage: pspxdp %s %s\n\n%s\n", cmd.name, cmd.usage, cmd.summary);
    if (cmd.details) std::fprintf(out, "\n%s\n", cmd.details);
    std::fprintf(out, "\nOptions:\n");
    for (const auto &o : cmd.options) {
        std::string left = o.short_name ? std::string("-") + o.short_name + ", " : "    ";
        left += "--" + std::string(o.name);
        if (o.metavar) left += std::string(" ") + o.metavar;
        std::fprintf(out, "  %-28s %s\n", left.c_str(), o.help);
    }
    std::fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

int fail(const std::string &message) {
    std::fprintf(stderr, "pspxdp: %s\n", message.c_str());
    return 1;
}

int fail_input(const std::string &message) {
    fail(message);
    return 2;
}

void warn(const std::string &message) {
    std::fprintf(stderr, "pspxdp: warning: %s\n", message.c_str());
}

} // namespace pspxdp::cli
