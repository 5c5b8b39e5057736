// The html export: analyze/flamegraph.html (embedded at build time) with the
// call tree of one event and the top procedures filled in as JSON.
#include <map>
#include <string>

#include "ecpi/analyze/reports/export.h"
#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

namespace detail {
extern const char* const kFlamegraphTemplate;
}  // namespace detail

namespace {

constexpr const char* kDataMarker = "/*ECPI_DATA*/";
constexpr std::size_t kTopRows = 200;

struct Node {
    std::uint32_t frame = 0;
    std::uint64_t value = 0;
    std::uint64_t self = 0;
    std::map<std::uint32_t, Node> children;
};

// [frame, value, self, [children]]: compact, and the page rebuilds the tree.
nlohmann::json tree_json(const Node& node) {
    nlohmann::json children = nlohmann::json::array();
    for (const auto& [frame, child] : node.children) children.push_back(tree_json(child));
    return nlohmann::json::array({node.frame, node.value, node.self, std::move(children)});
}

const char* kind_name(FlameFrame::Kind kind) {
    switch (kind) {
        case FlameFrame::Kind::kProcess: return "process";
        case FlameFrame::Kind::kKernel: return "kernel";
        default: return "user";
    }
}

}  // namespace

std::string render_flamegraph_html(const ExportModel& model, std::size_t event_index) {
    const ExportEvent& ev = model.events.at(event_index);
    FlameGraphData flame = flame_stacks(model, event_index);

    nlohmann::json frames = nlohmann::json::array();
    frames.push_back({{"name", "all"}, {"image", ""}, {"kind", "root"}, {"file", ""}, {"line", 0}});
    for (const auto& f : flame.frames)
        frames.push_back({{"name", f.name}, {"image", f.image}, {"kind", kind_name(f.kind)}, {"file", f.file}, {"line", f.line}});

    Node root;  // frame 0: "all"; flame frame i is page frame i + 1
    for (const auto& stack : flame.stacks) {
        Node* node = &root;
        node->value += stack.count;
        for (auto f : stack.frames) {
            Node& child = node->children[f + 1];
            child.frame = f + 1;
            child.value += stack.count;
            node = &child;
        }
        node->self += stack.count;
    }

    nlohmann::json top = nlohmann::json::array();
    for (const auto& t : procedure_totals(model, event_index)) {
        if (top.size() == kTopRows) break;
        const ExportFunction& fn = model.functions[t.function];
        top.push_back({{"name", fn.name}, {"image", model.images[fn.image].path}, {"self", t.self}, {"total", t.total}});
    }

    nlohmann::json data = {{"event", ev.name},
                           {"database", model.database},
                           {"epoch", model.epoch},
                           {"hostname", model.meta.hostname},
                           {"period", ev.period},
                           {"clock", ev.name.ends_with("-clock")},
                           {"stacks", ev.stacks},
                           {"total", ev.total},
                           {"frames", std::move(frames)},
                           {"tree", tree_json(root)},
                           {"top", std::move(top)},
                           {"warnings", model.warnings}};
    // Inside <script>, "</script>" or "<!--" in a name would end the block:
    // '<' only occurs inside JSON strings, where \u003c means the same.
    std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string escaped;
    escaped.reserve(json.size());
    for (char c : json) {
        if (c == '<') {
            escaped += "\\u003c";
        } else {
            escaped += c;
        }
    }
    std::string page = detail::kFlamegraphTemplate;
    std::size_t at = page.find(kDataMarker);
    if (at != std::string::npos) page.replace(at, std::string(kDataMarker).size(), escaped);
    return page;
}

}  // namespace ecpi::analyze
