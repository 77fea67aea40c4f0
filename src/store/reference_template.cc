#include "store/reference_template.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace zarrstream {

struct ReferenceTemplate::Expression {
  enum class Kind { kConstant, kName, kCall, kUnary, kBinary };
  Kind kind = Kind::kConstant;
  TemplateValue constant;
  std::string name;  // kName and kCall: the name; kUnary and kBinary: the operator
  std::vector<std::shared_ptr<const Expression>> operands;  // kCall: the arguments' values
  std::vector<std::string> argument_names;                  // kCall
};

namespace {

using Expression = ReferenceTemplate::Expression;
using ExpressionPtr = std::shared_ptr<const Expression>;

// Templates that use templates: deeper than this is a template that (indirectly) uses itself.
constexpr int kMaxDepth = 32;

struct Token {
  enum class Kind { kInt, kFloat, kString, kName, kOperator, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // kString: the decoded string; others: as written
  size_t position = 0;
};

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Parses the expressions of one template text. `pos` walks through the text; errors name the
// offset in it.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Status Error(size_t position, std::string_view what) const {
    return InvalidArgumentError("template '" + std::string(text_) + "': " + std::string(what) +
                                " at offset " + std::to_string(position));
  }

  // Lexes the tokens of the "{{ }}" span starting at `pos` (just past "{{"), up to its "}}".
  // Sets *end past the "}}" and *trim_after for a "-}}".
  Status LexSpan(size_t pos, size_t* end, bool* trim_after) {
    tokens_.clear();
    next_ = 0;
    while (true) {
      while (pos < text_.size() && IsSpace(text_[pos])) ++pos;
      if (pos >= text_.size()) return Error(pos, "unterminated '{{'");
      const char c = text_[pos];
      if (text_.compare(pos, 2, "}}") == 0) {
        *end = pos + 2;
        *trim_after = false;
        break;
      }
      if (text_.compare(pos, 3, "-}}") == 0) {
        *end = pos + 3;
        *trim_after = true;
        break;
      }
      Token token;
      token.position = pos;
      if (IsDigit(c)) {
        size_t start = pos;
        while (pos < text_.size() && (IsDigit(text_[pos]) || text_[pos] == '_')) ++pos;
        bool is_float = false;
        if (pos + 1 < text_.size() && text_[pos] == '.' && IsDigit(text_[pos + 1])) {
          is_float = true;
          ++pos;
          while (pos < text_.size() && IsDigit(text_[pos])) ++pos;
        }
        if (pos < text_.size() && (text_[pos] == 'e' || text_[pos] == 'E')) {
          size_t e = pos + 1;
          if (e < text_.size() && (text_[e] == '+' || text_[e] == '-')) ++e;
          if (e < text_.size() && IsDigit(text_[e])) {
            is_float = true;
            pos = e;
            while (pos < text_.size() && IsDigit(text_[pos])) ++pos;
          }
        }
        token.kind = is_float ? Token::Kind::kFloat : Token::Kind::kInt;
        for (size_t i = start; i < pos; ++i) {
          if (text_[i] != '_') token.text += text_[i];
        }
      } else if (IsNameStart(c)) {
        size_t start = pos;
        while (pos < text_.size() && (IsNameStart(text_[pos]) || IsDigit(text_[pos]))) ++pos;
        token.kind = Token::Kind::kName;
        token.text = std::string(text_.substr(start, pos - start));
      } else if (c == '\'' || c == '"') {
        ++pos;
        token.kind = Token::Kind::kString;
        while (true) {
          if (pos >= text_.size()) return Error(token.position, "unterminated string literal");
          const char s = text_[pos++];
          if (s == c) break;
          if (s != '\\') {
            token.text += s;
            continue;
          }
          if (pos >= text_.size()) return Error(token.position, "unterminated string literal");
          const char escaped = text_[pos++];
          switch (escaped) {
            case 'n':
              token.text += '\n';
              break;
            case 't':
              token.text += '\t';
              break;
            case '\\':
            case '\'':
            case '"':
              token.text += escaped;
              break;
            default:
              return Error(pos - 2, std::string("unsupported escape '\\") + escaped + "'");
          }
        }
      } else {
        static constexpr std::string_view kOperators[] = {"**", "//", "+", "-", "*", "/",
                                                          "%",  "~",  "(", ")", ",", "="};
        for (std::string_view op : kOperators) {
          if (text_.compare(pos, op.size(), op) == 0) {
            token.kind = Token::Kind::kOperator;
            token.text = std::string(op);
            pos += op.size();
            break;
          }
        }
        if (token.kind != Token::Kind::kOperator) {
          if (c == '|') return Error(pos, "filters ('|') are not supported");
          if (c == '.' || c == '[')
            return Error(pos, "attribute and item access are not supported");
          return Error(pos, std::string("unexpected character '") + c + "'");
        }
      }
      tokens_.push_back(std::move(token));
    }
    Token end_token;
    end_token.position = *end - 2;
    tokens_.push_back(end_token);
    return Status::Ok();
  }

  // The expression of the lexed span; the whole span must be one expression.
  Result<ExpressionPtr> ParseSpan() {
    if (Peek().kind == Token::Kind::kEnd) return Error(Peek().position, "empty '{{ }}'");
    ZS_ASSIGN_OR_RETURN(ExpressionPtr e, ParseAdditive());
    if (Peek().kind != Token::Kind::kEnd) {
      return Error(Peek().position, "unexpected '" + Peek().text + "'");
    }
    return e;
  }

 private:
  const Token& Peek() const { return tokens_[next_]; }
  bool PeekOperator(std::string_view op) const {
    return Peek().kind == Token::Kind::kOperator && Peek().text == op;
  }
  Token Take() { return tokens_[next_++]; }

  static ExpressionPtr Binary(std::string op, ExpressionPtr a, ExpressionPtr b) {
    auto e = std::make_shared<Expression>();
    e->kind = Expression::Kind::kBinary;
    e->name = std::move(op);
    e->operands = {std::move(a), std::move(b)};
    return e;
  }

  // Jinja2's precedence, loosest first: + -, then ~, then * / // %, then **, then unary.
  Result<ExpressionPtr> ParseAdditive() {
    ZS_ASSIGN_OR_RETURN(ExpressionPtr left, ParseConcat());
    while (PeekOperator("+") || PeekOperator("-")) {
      std::string op = Take().text;
      ZS_ASSIGN_OR_RETURN(ExpressionPtr right, ParseConcat());
      left = Binary(std::move(op), std::move(left), std::move(right));
    }
    return left;
  }
  Result<ExpressionPtr> ParseConcat() {
    ZS_ASSIGN_OR_RETURN(ExpressionPtr left, ParseMultiplicative());
    while (PeekOperator("~")) {
      Take();
      ZS_ASSIGN_OR_RETURN(ExpressionPtr right, ParseMultiplicative());
      left = Binary("~", std::move(left), std::move(right));
    }
    return left;
  }
  Result<ExpressionPtr> ParseMultiplicative() {
    ZS_ASSIGN_OR_RETURN(ExpressionPtr left, ParsePower());
    while (PeekOperator("*") || PeekOperator("/") || PeekOperator("//") || PeekOperator("%")) {
      std::string op = Take().text;
      ZS_ASSIGN_OR_RETURN(ExpressionPtr right, ParsePower());
      left = Binary(std::move(op), std::move(left), std::move(right));
    }
    return left;
  }
  Result<ExpressionPtr> ParsePower() {
    ZS_ASSIGN_OR_RETURN(ExpressionPtr left, ParseUnary());
    while (PeekOperator("**")) {
      Take();
      ZS_ASSIGN_OR_RETURN(ExpressionPtr right, ParseUnary());
      left = Binary("**", std::move(left), std::move(right));
    }
    return left;
  }
  Result<ExpressionPtr> ParseUnary() {
    if (PeekOperator("-") || PeekOperator("+")) {
      auto e = std::make_shared<Expression>();
      e->kind = Expression::Kind::kUnary;
      e->name = Take().text;
      ZS_ASSIGN_OR_RETURN(ExpressionPtr operand, ParseUnary());
      e->operands = {std::move(operand)};
      return ExpressionPtr(std::move(e));
    }
    return ParsePrimary();
  }
  Result<ExpressionPtr> ParsePrimary() {
    Token token = Take();
    auto e = std::make_shared<Expression>();
    switch (token.kind) {
      case Token::Kind::kInt: {
        int64_t value = 0;
        auto [ptr, ec] =
            std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (ec != std::errc() || ptr != token.text.data() + token.text.size()) {
          return Error(token.position, "integer literal " + token.text + " out of range");
        }
        e->constant = value;
        return ExpressionPtr(std::move(e));
      }
      case Token::Kind::kFloat: {
        double value = 0;
        auto [ptr, ec] =
            std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (ec != std::errc() || ptr != token.text.data() + token.text.size()) {
          return Error(token.position, "bad float literal " + token.text);
        }
        e->constant = value;
        return ExpressionPtr(std::move(e));
      }
      case Token::Kind::kString:
        e->constant = std::move(token.text);
        return ExpressionPtr(std::move(e));
      case Token::Kind::kName:
        e->name = std::move(token.text);
        if (!PeekOperator("(")) {
          e->kind = Expression::Kind::kName;
          return ExpressionPtr(std::move(e));
        }
        Take();
        e->kind = Expression::Kind::kCall;
        while (!PeekOperator(")")) {
          if (!e->operands.empty()) {
            if (!PeekOperator(",")) return Error(Peek().position, "expected ',' or ')'");
            Take();
          }
          if (Peek().kind != Token::Kind::kName) {
            return Error(Peek().position, "template arguments are keyword arguments (name=value)");
          }
          std::string name = Take().text;
          if (!PeekOperator("=")) {
            return Error(Peek().position, "template arguments are keyword arguments (name=value)");
          }
          Take();
          ZS_ASSIGN_OR_RETURN(ExpressionPtr value, ParseAdditive());
          e->argument_names.push_back(std::move(name));
          e->operands.push_back(std::move(value));
        }
        Take();
        return ExpressionPtr(std::move(e));
      case Token::Kind::kOperator:
        if (token.text == "(") {
          ZS_ASSIGN_OR_RETURN(ExpressionPtr inner, ParseAdditive());
          if (!PeekOperator(")")) return Error(Peek().position, "expected ')'");
          Take();
          return inner;
        }
        return Error(token.position, "unexpected '" + token.text + "'");
      case Token::Kind::kEnd:
        break;
    }
    return Error(token.position, "expression ends early");
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

// A float as Python's str() writes it: the shortest digits that read back the same, positional
// for exponents -4..15 and with at least one decimal ("3.0"), scientific otherwise ("1e+16").
std::string FormatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [ptr, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, ptr);  // "-d.ddde+XX"
  const size_t e = scientific.find('e');
  int exponent = std::stoi(scientific.substr(e + 1));
  std::string sign = scientific[0] == '-' ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < e; ++i) {
    if (scientific[i] != '.') digits += scientific[i];
  }
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0)
    return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t integer_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= integer_digits) {
    return sign + digits + std::string(integer_digits - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
}

std::string ToText(const TemplateValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return FormatFloat(*d);
  return std::get<std::string>(value);
}

bool IsNumber(const TemplateValue& value) { return !std::holds_alternative<std::string>(value); }

double AsDouble(const TemplateValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return std::get<double>(value);
}

const char* TypeName(const TemplateValue& value) {
  if (std::holds_alternative<int64_t>(value)) return "an integer";
  if (std::holds_alternative<double>(value)) return "a float";
  return "a string";
}

Status EvaluationError(const std::string& what) {
  return InvalidArgumentError("evaluating a template: " + what);
}

Status OverflowError(const std::string& op) {
  return EvaluationError("integer overflow in '" + op + "'");
}

// Python's printf-style `format % value` with one conversion.
Result<std::string> FormatPercent(const std::string& format, const TemplateValue& value) {
  std::string out;
  int conversions = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    size_t j = i + 1;
    if (j < format.size() && format[j] == '%') {
      out += '%';
      i = j;
      continue;
    }
    std::string spec = "%";
    while (j < format.size() && (format[j] == '-' || format[j] == '0')) spec += format[j++];
    while (j < format.size() && IsDigit(format[j])) spec += format[j++];
    if (j < format.size() && format[j] == '.') {
      spec += format[j++];
      while (j < format.size() && IsDigit(format[j])) spec += format[j++];
    }
    if (j >= format.size()) return EvaluationError("'" + format + "' % ...: incomplete format");
    const char type = format[j];
    i = j;
    if (++conversions > 1) {
      return EvaluationError("'" + format + "' % ...: one value formats one conversion only");
    }
    char buffer[128];
    if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o') {
      if (!IsNumber(value)) {
        return EvaluationError("'" + format + "' % ...: %" + type + " needs a number, not " +
                               TypeName(value));
      }
      const double d = AsDouble(value);
      const long long n = std::holds_alternative<int64_t>(value)
                              ? static_cast<long long>(std::get<int64_t>(value))
                              : static_cast<long long>(std::trunc(d));
      spec += "ll";
      spec += type == 'i' ? 'd' : type;
      std::snprintf(buffer, sizeof(buffer), spec.c_str(), n);
      out += buffer;
    } else if (type == 'f') {
      if (!IsNumber(value)) {
        return EvaluationError("'" + format + "' % ...: %f needs a number, not " + TypeName(value));
      }
      spec += 'f';
      std::snprintf(buffer, sizeof(buffer), spec.c_str(), AsDouble(value));
      out += buffer;
    } else if (type == 's') {
      spec += 's';
      const std::string text = ToText(value);
      std::vector<char> wide(text.size() + 128);
      std::snprintf(wide.data(), wide.size(), spec.c_str(), text.c_str());
      out += wide.data();
    } else {
      return EvaluationError("'" + format + "' % ...: unsupported conversion '%" + type + "'");
    }
  }
  if (conversions == 0) {
    return EvaluationError("'" + format + "' % ...: the format has no conversion for the value");
  }
  return out;
}

Result<TemplateValue> Arithmetic(const std::string& op, const TemplateValue& a,
                                 const TemplateValue& b) {
  const auto* ia = std::get_if<int64_t>(&a);
  const auto* ib = std::get_if<int64_t>(&b);
  if (ia != nullptr && ib != nullptr) {
    const int64_t x = *ia, y = *ib;
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return OverflowError(op);
      return TemplateValue(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return OverflowError(op);
      return TemplateValue(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return OverflowError(op);
      return TemplateValue(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return EvaluationError("division by zero in '" + op + "'");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return OverflowError(op);
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python rounds towards negative infinity
        q -= 1;
        m += y;
      }
      return TemplateValue(op == "//" ? q : m);
    }
    if (op == "**" && y >= 0) {
      if (x == 0 || x == 1) return TemplateValue(y == 0 ? int64_t{1} : x);
      if (x == -1) return TemplateValue(y % 2 == 0 ? int64_t{1} : int64_t{-1});
      int64_t result = 1;  // |x| >= 2: overflows within 63 steps
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return OverflowError(op);
      }
      return TemplateValue(result);
    }
  }
  const double x = AsDouble(a), y = AsDouble(b);
  if (op == "+") return TemplateValue(x + y);
  if (op == "-") return TemplateValue(x - y);
  if (op == "*") return TemplateValue(x * y);
  if (op == "**") return TemplateValue(std::pow(x, y));
  if (y == 0) return EvaluationError("division by zero in '" + op + "'");
  if (op == "/") return TemplateValue(x / y);
  if (op == "//") return TemplateValue(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return TemplateValue(m);
}

}  // namespace

// The evaluation of expressions, a friend of ReferenceTemplate (templates render templates).
struct TemplateEvaluator {
  static Result<TemplateValue> Evaluate(const Expression& e, const TemplateVariables& variables,
                                        const TemplateLibrary& library, int depth) {
    switch (e.kind) {
      case Expression::Kind::kConstant:
        return e.constant;
      case Expression::Kind::kName: {
        if (auto it = variables.find(e.name); it != variables.end()) return it->second;
        if (const ReferenceTemplate* t = library.Find(e.name)) {
          ZS_ASSIGN_OR_RETURN(std::string text, RenderNamed(*t, {}, library, depth, e.name));
          return TemplateValue(std::move(text));
        }
        return EvaluationError("'" + e.name + "' is neither a variable nor a template");
      }
      case Expression::Kind::kCall: {
        const ReferenceTemplate* t = library.Find(e.name);
        if (t == nullptr) {
          return EvaluationError("'" + e.name + "(...)': no template of that name");
        }
        TemplateVariables arguments;
        for (size_t i = 0; i < e.operands.size(); ++i) {
          ZS_ASSIGN_OR_RETURN(TemplateValue v, Evaluate(*e.operands[i], variables, library, depth));
          arguments[e.argument_names[i]] = std::move(v);
        }
        ZS_ASSIGN_OR_RETURN(std::string text, RenderNamed(*t, arguments, library, depth, e.name));
        return TemplateValue(std::move(text));
      }
      case Expression::Kind::kUnary: {
        ZS_ASSIGN_OR_RETURN(TemplateValue v, Evaluate(*e.operands[0], variables, library, depth));
        if (!IsNumber(v)) return EvaluationError("unary '" + e.name + "' of " + TypeName(v));
        if (e.name == "+") return v;
        if (const auto* i = std::get_if<int64_t>(&v)) {
          if (*i == std::numeric_limits<int64_t>::min()) return OverflowError("-");
          return TemplateValue(-*i);
        }
        return TemplateValue(-std::get<double>(v));
      }
      case Expression::Kind::kBinary: {
        ZS_ASSIGN_OR_RETURN(TemplateValue a, Evaluate(*e.operands[0], variables, library, depth));
        ZS_ASSIGN_OR_RETURN(TemplateValue b, Evaluate(*e.operands[1], variables, library, depth));
        if (e.name == "~") return TemplateValue(ToText(a) + ToText(b));
        if (e.name == "%" && !IsNumber(a)) {
          ZS_ASSIGN_OR_RETURN(std::string text, FormatPercent(std::get<std::string>(a), b));
          return TemplateValue(std::move(text));
        }
        if (e.name == "+" && !IsNumber(a) && !IsNumber(b)) {
          return TemplateValue(std::get<std::string>(a) + std::get<std::string>(b));
        }
        if (!IsNumber(a) || !IsNumber(b)) {
          return EvaluationError(std::string("'") + e.name + "' of " + TypeName(a) + " and " +
                                 TypeName(b) + " (use '~' to join text)");
        }
        return Arithmetic(e.name, a, b);
      }
    }
    return InternalError("unknown template expression");
  }

  static Result<std::string> RenderNamed(const ReferenceTemplate& t,
                                         const TemplateVariables& variables,
                                         const TemplateLibrary& library, int depth,
                                         std::string_view name) {
    if (depth >= kMaxDepth) {
      return EvaluationError("templates nest more than " + std::to_string(kMaxDepth) +
                             " deep at '" + std::string(name) + "' (a template that uses itself?)");
    }
    return t.RenderAt(variables, library, depth + 1);
  }
};

Result<ReferenceTemplate> ReferenceTemplate::Parse(std::string_view text) {
  ReferenceTemplate t;
  t.text_ = std::string(text);
  Parser parser(text);
  std::string literal;
  bool trim_next = false;  // the span before ended with "-}}": strip leading whitespace
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find('{', pos);
    while (open != std::string_view::npos && open + 1 < text.size() && text[open + 1] != '{' &&
           text[open + 1] != '%' && text[open + 1] != '#') {
      open = text.find('{', open + 1);
    }
    if (open == std::string_view::npos || open + 1 >= text.size()) {
      literal.append(text.substr(pos));
      break;
    }
    literal.append(text.substr(pos, open - pos));
    if (text[open + 1] == '%') return parser.Error(open, "statements ('{%') are not supported");
    if (text[open + 1] == '#') return parser.Error(open, "comments ('{#') are not supported");
    size_t start = open + 2;
    if (start < text.size() && text[start] == '-') {
      ++start;
      while (!literal.empty() && IsSpace(literal.back())) literal.pop_back();
    }
    if (trim_next) {
      size_t lead = 0;
      while (lead < literal.size() && IsSpace(literal[lead])) ++lead;
      literal.erase(0, lead);
    }
    size_t end = 0;
    bool trim_after = false;
    ZS_RETURN_IF_ERROR(parser.LexSpan(start, &end, &trim_after));
    ZS_ASSIGN_OR_RETURN(ExpressionPtr expression, parser.ParseSpan());
    t.parts_.push_back(Part{std::move(literal), std::move(expression)});
    literal.clear();
    trim_next = trim_after;
    pos = end;
  }
  if (trim_next) {
    size_t lead = 0;
    while (lead < literal.size() && IsSpace(literal[lead])) ++lead;
    literal.erase(0, lead);
  }
  if (!literal.empty() || t.parts_.empty()) t.parts_.push_back(Part{std::move(literal), nullptr});
  return t;
}

bool ReferenceTemplate::is_literal() const {
  return parts_.size() == 1 && parts_[0].expression == nullptr;
}

Result<std::string> ReferenceTemplate::Render(const TemplateVariables& variables,
                                              const TemplateLibrary& library) const {
  return RenderAt(variables, library, 0);
}

Result<std::string> ReferenceTemplate::RenderAt(const TemplateVariables& variables,
                                                const TemplateLibrary& library, int depth) const {
  std::string out;
  for (const Part& part : parts_) {
    out += part.literal;
    if (part.expression == nullptr) continue;
    Result<TemplateValue> value =
        TemplateEvaluator::Evaluate(*part.expression, variables, library, depth);
    if (!value.ok()) return value.status().WithContext("template '" + text_ + "'");
    out += ToText(*value);
  }
  return out;
}

Result<TemplateLibrary> TemplateLibrary::Parse(
    const std::map<std::string, std::string>& templates) {
  TemplateLibrary library;
  for (const auto& [name, text] : templates) {
    Result<ReferenceTemplate> t = ReferenceTemplate::Parse(text);
    if (!t.ok()) return t.status().WithContext("templates['" + name + "']");
    library.templates_.emplace(name, std::move(*t));
  }
  return library;
}

const ReferenceTemplate* TemplateLibrary::Find(std::string_view name) const {
  auto it = templates_.find(name);
  return it == templates_.end() ? nullptr : &it->second;
}

}  // namespace zarrstream
