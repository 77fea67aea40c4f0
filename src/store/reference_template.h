// Reference templates: the part of Jinja2 that Kerchunk reference sets (version 1) use in their
// "templates", in the URLs of "refs" and in the key, URL, offset and length of "gen" entries.
//
// A template is literal text with "{{ expression }}" spans. Expressions are Jinja2's: integer,
// float and string literals ('...' or "..."), names, parentheses, unary + and -, ** (binding
// tighter than a unary minus on its left, as in Jinja2), *, / (true division), // (floor
// division), % (modulo, or printf-style formatting of one value when the left side is a string:
// %d %i %s %x %X %o with '-', '0' flags and a width, and %%), ~ (concatenation as strings), + and
// -. A name is a variable (a "gen" dimension) or a template of the set; a template is used bare
// ("{{u}}") or called with keyword arguments that become its variables ("{{f(c='text')}}").
// Anything else (statements "{% %}", comments "{# #}", filters, tests, attribute access,
// comparisons) is refused when parsed, and a name that is not defined is an error when rendered,
// never rendered empty as Jinja2 would: a URL with a hole in it would read the wrong file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

using TemplateValue = std::variant<int64_t, double, std::string>;
using TemplateVariables = std::map<std::string, TemplateValue, std::less<>>;

class TemplateLibrary;

// A parsed template. Immutable; copies share the parsed form. Thread-safe.
class ReferenceTemplate {
 public:
  struct Expression;  // a parsed "{{ }}" span (defined where it is evaluated)

  // Parses `text`; errors say what is wrong and where.
  static Result<ReferenceTemplate> Parse(std::string_view text);

  // Renders with `variables` and the templates of `library` in scope (a variable hides a template
  // of the same name).
  Result<std::string> Render(const TemplateVariables& variables,
                             const TemplateLibrary& library) const;

  // True when the template has no "{{ }}" span: it renders to its text.
  bool is_literal() const;
  const std::string& text() const { return text_; }

 private:
  friend struct TemplateEvaluator;
  struct Part {
    std::string literal;                           // text before `expression`
    std::shared_ptr<const Expression> expression;  // null for trailing text
  };

  Result<std::string> RenderAt(const TemplateVariables& variables, const TemplateLibrary& library,
                               int depth) const;

  std::string text_;
  std::vector<Part> parts_;
};

// A reference set's named templates. Immutable after Parse; thread-safe.
class TemplateLibrary {
 public:
  TemplateLibrary() = default;
  static Result<TemplateLibrary> Parse(const std::map<std::string, std::string>& templates);

  const ReferenceTemplate* Find(std::string_view name) const;
  bool empty() const { return templates_.empty(); }

 private:
  std::map<std::string, ReferenceTemplate, std::less<>> templates_;
};

}  // namespace zarrstream
