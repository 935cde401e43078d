// The table machinery on its own, with a section shaped like the coming
// `recompute:` one: a list of maps, a key filling two members, flattened nested
// members and optional values. Errors must carry the full path ("rules[1].range").
#include <gtest/gtest.h>

#include <optional>

#include "tests/unit/config/config_test_util.h"
#include "trainer/config/fields.h"

namespace trainer::config_test {

struct RuleOptions {
  std::optional<int64_t> group;
  std::optional<std::string> name;
};

struct Rule {
  int64_t first = 0, last = 0;  // YAML: range: [first, last]
  RuleOptions options;          // YAML: group, name (flat in the rule's map)
};

struct RuleSection {
  std::vector<Rule> rules;
  bool strict = false;
};

}  // namespace trainer::config_test

namespace trainer::config_detail {

template <>
struct ConfigSchema<config_test::Rule> {
  static const std::vector<FieldSpec<config_test::Rule>>& fields() {
    using config_test::Rule;
    using config_test::RuleOptions;
    static const std::vector<FieldSpec<Rule>> table = {
        {"range",
         [](const YAML::Node& node, const std::string& path, Rule& rule) {
           std::vector<int64_t> range;
           read_value(node, path, range);
           if (range.size() != 2) {
             throw runtime::ConfigError(
                 path, "expected [first, last], got " + std::to_string(range.size()) + " entries");
           }
           rule.first = range[0];
           rule.last = range[1];
         },
         [](YAML::Emitter& out, const Rule& rule) {
           write_value(out, std::vector<int64_t>{rule.first, rule.last});
         }},
        field("group", &Rule::options, &RuleOptions::group),
        field("name", &Rule::options, &RuleOptions::name),
    };
    return table;
  }
};

template <>
struct ConfigSchema<config_test::RuleSection> {
  static const std::vector<FieldSpec<config_test::RuleSection>>& fields() {
    using config_test::RuleSection;
    static const std::vector<FieldSpec<RuleSection>> table = {
        field("rules", &RuleSection::rules),
        field("strict", &RuleSection::strict),
    };
    return table;
  }
};

}  // namespace trainer::config_detail

namespace trainer::config_test {
namespace {

RuleSection read_section(const std::string& yaml) {
  RuleSection section;
  config_detail::read_value(YAML::Load(yaml), "recompute", section);
  return section;
}

::testing::AssertionResult section_rejected(const std::string& yaml, const std::string& path,
                                            std::initializer_list<std::string> pieces) {
  return throws_config_error([&] { read_section(yaml); }, path, pieces);
}

// Expects `rule` to equal `want` member by member.
void expect_rule(const Rule& rule, const Rule& want) {
  EXPECT_EQ(rule.first, want.first);
  EXPECT_EQ(rule.last, want.last);
  EXPECT_EQ(rule.options.group, want.options.group);
  EXPECT_EQ(rule.options.name, want.options.name);
}

TEST(ConfigFields, ReadsListsOfMapsWithOptionalsAndFlatMembers) {
  const RuleSection section = read_section(
      "strict: true\n"
      "rules:\n"
      "  - {range: [0, 3], group: 2, name: first}\n"
      "  - range: [4, 7]\n"
      "    group: ~\n");
  EXPECT_TRUE(section.strict);
  ASSERT_EQ(section.rules.size(), 2u);
  expect_rule(section.rules[0], Rule{0, 3, RuleOptions{2, "first"}});
  expect_rule(section.rules[1], Rule{4, 7, RuleOptions{}});
}

TEST(ConfigFields, ErrorsInsideListsCarryTheFullPath) {
  EXPECT_TRUE(section_rejected("rules: [{range: [0, 1]}, {range: [2]}]\n",
                               "recompute.rules[1].range",
                               {"expected [first, last], got 1 entries"}));
  EXPECT_TRUE(section_rejected("rules: [{range: [0, 1]}, {grup: 2}]\n", "recompute.rules[1].grup",
                               {"unknown key (known: range, group, name)"}));
  EXPECT_TRUE(section_rejected("rules: [{range: [0, x]}]\n", "recompute.rules[0].range[1]",
                               {"expected an integer, got 'x'"}));
  EXPECT_TRUE(section_rejected("rules: [{group: 1.5}]\n", "recompute.rules[0].group",
                               {"expected an integer, got '1.5'"}));
  EXPECT_TRUE(section_rejected("rules: [5]\n", "recompute.rules[0]", {"expected a map, got '5'"}));
}

TEST(ConfigFields, WritesWhatItReads) {
  RuleSection section;
  section.strict = true;
  section.rules = {Rule{1, 2, RuleOptions{3, "a b"}}, Rule{4, 5, RuleOptions{}}};
  YAML::Emitter out;
  config_detail::write_value(out, section);
  const std::string yaml = out.c_str();
  SCOPED_TRACE(yaml);
  EXPECT_NE(yaml.find("range: [4, 5]"), std::string::npos);
  EXPECT_NE(yaml.find("group: ~"), std::string::npos);
  const RuleSection back = read_section(yaml);
  EXPECT_TRUE(back.strict);
  ASSERT_EQ(back.rules.size(), 2u);
  expect_rule(back.rules[0], section.rules[0]);
  expect_rule(back.rules[1], section.rules[1]);
}

}  // namespace
}  // namespace trainer::config_test
