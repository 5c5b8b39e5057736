// dump_document (include/ecpi/json_document.h): schema and version first,
// everything else exactly as nlohmann's dump() writes it.
#include <doctest/doctest.h>

#include "ecpi/json_document.h"

using nlohmann::json;

TEST_CASE("dump_document puts schema and version first") {
    const json doc = {{"alpha", 1}, {"schema", "ecpi.test"}, {"version", 3}, {"rows", {{{"a", 1}}}}};
    for (int indent : {-1, 0, 1, 2}) {
        const std::string text = ecpi::dump_document(doc, indent);
        CHECK(json::parse(text) == doc);
        const auto schema = text.find("\"schema\"");
        const auto version = text.find("\"version\"");
        const auto alpha = text.find("\"alpha\"");
        CHECK(schema < version);
        CHECK(version < alpha);
    }
    CHECK(ecpi::dump_document(doc, -1) == R"({"schema":"ecpi.test","version":3,"alpha":1,"rows":[{"a":1}]})");
}

TEST_CASE("dump_document writes nested values as dump() does") {
    // Already in order: the text must be dump()'s, byte for byte.
    const json doc = {{"schema", "ecpi.test\nline"}, {"version", 1},
                      {"zz", {{{"a", 1}, {"b", {1, {{"c", json::array({1, 2})}}}}}, json::object()}}};
    for (int indent : {-1, 0, 1, 2, 4}) CHECK(ecpi::dump_document(doc, indent) == doc.dump(indent));
}

TEST_CASE("dump_document leaves what is not an object to dump()") {
    CHECK(ecpi::dump_document(json::array({1, 2}), 2) == json::array({1, 2}).dump(2));
    CHECK(ecpi::dump_document(json::object(), 2) == "{}");
}
