#include "store/reference_template.h"

#include <gtest/gtest.h>

#include "util/status_test_util.h"

namespace zarrstream {
namespace {

// Renders `text` with `variables` and `templates`; fails the test on an error.
std::string Render(std::string_view text, const TemplateVariables& variables = {},
                   const std::map<std::string, std::string>& templates = {}) {
  Result<TemplateLibrary> library = TemplateLibrary::Parse(templates);
  EXPECT_TRUE(library.ok()) << library.status().ToString();
  Result<ReferenceTemplate> t = ReferenceTemplate::Parse(text);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok() || !library.ok()) return "<error>";
  Result<std::string> out = t->Render(variables, *library);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : "<error>";
}

Status RenderError(std::string_view text, const TemplateVariables& variables = {},
                   const std::map<std::string, std::string>& templates = {}) {
  ZS_ASSIGN_OR_RETURN(TemplateLibrary library, TemplateLibrary::Parse(templates));
  ZS_ASSIGN_OR_RETURN(ReferenceTemplate t, ReferenceTemplate::Parse(text));
  return t.Render(variables, library).status();
}

// The example of the Kerchunk reference specification (version 1).
TEST(ReferenceTemplateTest, SpecificationExample) {
  const std::map<std::string, std::string> templates = {{"u", "server.domain/path"},
                                                        {"f", "{{c}}"}};
  EXPECT_EQ(Render("http://{{u}}", {}, templates), "http://server.domain/path");
  EXPECT_EQ(Render("http://{{f(c='text')}}", {}, templates), "http://text");
  EXPECT_EQ(Render("gen_key{{i}}", {{"i", int64_t{3}}}), "gen_key3");
  EXPECT_EQ(Render("http://{{u}}_{{i}}", {{"i", int64_t{3}}}, templates),
            "http://server.domain/path_3");
  EXPECT_EQ(Render("{{(i + 1) * 1000}}", {{"i", int64_t{3}}}), "4000");
}

TEST(ReferenceTemplateTest, LiteralTextAndWhitespace) {
  EXPECT_EQ(Render(""), "");
  EXPECT_EQ(Render("plain/{single}/brace"), "plain/{single}/brace");
  EXPECT_EQ(Render("{{ i }}-{{i}}", {{"i", int64_t{7}}}), "7-7");
  EXPECT_EQ(Render("a  {{- i -}}  b", {{"i", int64_t{1}}}), "a1b");
  EXPECT_TRUE(ReferenceTemplate::Parse("x").value().is_literal());
  EXPECT_FALSE(ReferenceTemplate::Parse("{{x}}").value().is_literal());
}

// Jinja2's (and so Python's) arithmetic: floor division and modulo round towards -infinity, '/'
// is true division, '**' binds tighter than '*' and a unary minus on its left applies first.
TEST(ReferenceTemplateTest, ArithmeticAsJinja) {
  const TemplateVariables v = {{"i", int64_t{7}}, {"j", int64_t{-7}}};
  EXPECT_EQ(Render("{{ i // 2 }} {{ j // 2 }} {{ i % 3 }} {{ j % 3 }} {{ i % -3 }}", v),
            "3 -4 1 2 -2");
  EXPECT_EQ(Render("{{ i / 2 }} {{ 6 / 3 }} {{ 1 / 4 }}", v), "3.5 2.0 0.25");
  EXPECT_EQ(Render("{{ 2 * 3 ** 2 }} {{ -2 ** 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}"), "18 4 1024 0.5");
  EXPECT_EQ(Render("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ - i + 1 }}", v), "3 9 -6");
  EXPECT_EQ(Render("{{ 1e16 }} {{ 1.5e-5 }} {{ 0.001 }} {{ 123.25 }}"),
            "1e+16 1.5e-05 0.001 123.25");
  EXPECT_EQ(Render("{{ 1_000 * 3 }}"), "3000");
}

TEST(ReferenceTemplateTest, Strings) {
  const TemplateVariables v = {{"i", int64_t{7}}, {"name", std::string("t2m")}};
  EXPECT_EQ(Render("{{ 'a' ~ i ~ \"b\" }}", v), "a7b");
  EXPECT_EQ(Render("{{ 'x' + name }}", v), "xt2m");
  EXPECT_EQ(Render("{{ 2 * 3 ~ 4 }}", v), "64");  // '*' binds tighter than '~'
  EXPECT_EQ(Render("{{ 0 ** 0 }} {{ (-1) ** 3 }} {{ (-2) ** 3 }}"), "1 -1 -8");
  EXPECT_EQ(Render("file_{{ '%03d' % i }}.nc", v), "file_007.nc");
  EXPECT_EQ(Render("{{ '%s/%%' % name }} {{ '%-4d|' % i }} {{ '%x' % 255 }}", v), "t2m/% 7   | ff");
  EXPECT_EQ(Render("{{ 'it\\'s' }}"), "it's");
}

TEST(ReferenceTemplateTest, TemplatesUseVariablesTemplatesAndArguments) {
  const std::map<std::string, std::string> templates = {
      {"root", "https://host/data"}, {"file", "{{root}}/{{year}}.nc"}, {"year2", "{{y * 2}}"}};
  EXPECT_EQ(Render("{{file(year=2020)}}", {}, templates), "https://host/data/2020.nc");
  EXPECT_EQ(Render("{{file(year=1999 + i)}}", {{"i", int64_t{1}}}, templates),
            "https://host/data/2000.nc");
  EXPECT_EQ(Render("{{ year2(y=i) }}", {{"i", int64_t{4}}}, templates), "8");
  // A variable hides a template of the same name.
  EXPECT_EQ(Render("{{root}}", {{"root", std::string("mine")}}, templates), "mine");
}

TEST(ReferenceTemplateTest, RefusesWhatItDoesNotImplement) {
  for (const char* text : {"{% for i in x %}", "{# comment #}", "{{ x | int }}", "{{ x.y }}",
                           "{{ x[0] }}", "{{ x == 1 }}", "{{ }}", "{{ 1 +", "{{ 'open }}",
                           "{{ f(1) }}", "{{ (1 }}", "{{ 99999999999999999999 }}"}) {
    Result<ReferenceTemplate> t = ReferenceTemplate::Parse(text);
    EXPECT_FALSE(t.ok()) << text;
    if (!t.ok()) {
      ExpectErrorContains(t.status(), ErrorCode::kInvalidArgument, {"template '", "at offset"});
    }
  }
}

TEST(ReferenceTemplateTest, EvaluationErrorsNameTheProblem) {
  ExpectErrorContains(RenderError("http://{{ host }}/x"), ErrorCode::kInvalidArgument,
                      {"'host' is neither a variable nor a template", "http://{{ host }}/x"});
  ExpectErrorContains(RenderError("{{ f(c=1) }}"), ErrorCode::kInvalidArgument,
                      {"no template of that name"});
  ExpectErrorContains(RenderError("{{ 1 // 0 }}"), ErrorCode::kInvalidArgument,
                      {"division by zero"});
  ExpectErrorContains(RenderError("{{ 9223372036854775807 + 1 }}"), ErrorCode::kInvalidArgument,
                      {"overflow"});
  ExpectErrorContains(RenderError("{{ 2 ** 64 }}"), ErrorCode::kInvalidArgument, {"overflow"});
  ExpectErrorContains(RenderError("{{ 'a' - 1 }}"), ErrorCode::kInvalidArgument,
                      {"a string and an integer"});
  ExpectErrorContains(RenderError("{{ '%d' % 'x' }}"), ErrorCode::kInvalidArgument,
                      {"needs a number"});
  ExpectErrorContains(RenderError("{{ '%d %d' % 1 }}"), ErrorCode::kInvalidArgument,
                      {"one conversion"});
  ExpectErrorContains(RenderError("{{ a }}", {}, {{"a", "{{ b }}"}, {"b", "{{ a }}"}}),
                      ErrorCode::kInvalidArgument, {"nest more than"});
  // A template whose own text is bad is named.
  ExpectErrorContains(TemplateLibrary::Parse({{"bad", "{{ x |"}}).status(),
                      ErrorCode::kInvalidArgument, {"templates['bad']"});
}

}  // namespace
}  // namespace zarrstream
