//! `calculate`: a small arithmetic evaluator written here rather than taken from a crate —
//! `evalexpr` is AGPL-3.0 since version 12 and `meval` has not been released since 2017. A
//! recursive-descent parser over `f64` with the usual precedence:
//!
//! ```text
//! expr    = term (('+' | '-') term)*
//! term    = unary (('*' | '/' | '%') unary)*          '%' is the remainder
//! unary   = ('-' | '+') unary | power
//! power   = postfix ('^' unary)?                      right-associative: 2^3^2 = 2^9
//! postfix = primary '%'?                              '%' at the end of a number: a percentage
//! primary = number | constant | function '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! Numbers may use `_` or `,` between digit groups (`1,000,000`) and an exponent; constants are
//! `pi` and `e`; functions are pure maths (`sqrt`, `abs`, `round`, `floor`, `ceil`, `ln`,
//! `log10`, `log2`, `exp`, `sin`, `cos`, `tan`, `min`, `max`, `pow`) — nothing can reach a file,
//! a variable or the clock. Input is at most [`MAX_EXPRESSION_CHARS`], nesting at most
//! [`MAX_DEPTH`], and results must be finite.

/// The longest expression accepted.
pub const MAX_EXPRESSION_CHARS: usize = 500;
/// The deepest nesting of parentheses, unary signs and powers.
pub const MAX_DEPTH: usize = 64;

/// The value of `expression`, or why it has none.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    if expression.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(format!("longer than {MAX_EXPRESSION_CHARS} characters"));
    }
    let tokens = tokenize(expression)?;
    if tokens.is_empty() {
        return Err("there is nothing to compute".into());
    }
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    if let Some(t) = parser.peek() {
        return Err(format!("unexpected {} at the end", t.describe()));
    }
    finite(value)
}

/// A result as people write it: integers without a fraction, others to 12 significant
/// digits without trailing zeros.
pub fn format_number(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let s = format!("{:.*e}", 11, x);
    let Ok(rounded) = s.parse::<f64>() else {
        return x.to_string();
    };
    if rounded.abs() >= 1e15 || rounded.abs() < 1e-6 {
        return format!("{rounded:e}");
    }
    let mut out = format!("{rounded:.12}");
    if out.contains('.') {
        while out.ends_with('0') {
            out.pop();
        }
        if out.ends_with('.') {
            out.pop();
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Op(char),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Number(n) => format!("number {}", format_number(*n)),
            Token::Name(n) => format!("`{n}`"),
            Token::Op(c) => format!("`{c}`"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                let mut digits = String::new();
                while i < chars.len() {
                    let d = chars[i];
                    let grouped = (d == '_' || d == ',')
                        && i + 3 < chars.len()
                        && chars[i + 1..].iter().take(3).all(char::is_ascii_digit)
                        && chars.get(i + 4).is_none_or(|n| !n.is_ascii_digit());
                    if d.is_ascii_digit() || d == '.' {
                        digits.push(d);
                    } else if grouped && !digits.contains('.') {
                        // a digit-group separator, not a list comma
                    } else if (d == 'e' || d == 'E')
                        && chars
                            .get(i + 1)
                            .is_some_and(|n| n.is_ascii_digit() || *n == '-' || *n == '+')
                    {
                        digits.push('e');
                        if matches!(chars[i + 1], '-' | '+') {
                            i += 1;
                            digits.push(chars[i]);
                        }
                    } else {
                        break;
                    }
                    i += 1;
                }
                let n: f64 = digits.parse().map_err(|_| {
                    format!(
                        "`{}` is not a number",
                        chars[start..i].iter().collect::<String>()
                    )
                })?;
                tokens.push(Token::Number(n));
            }
            c if c.is_alphabetic() => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect::<String>().to_lowercase();
                tokens.push(Token::Name(name));
            }
            '+' | '-' | '*' | '/' | '%' | '^' | '(' | ')' | ',' => {
                tokens.push(Token::Op(c));
                i += 1;
            }
            '×' | '·' => {
                tokens.push(Token::Op('*'));
                i += 1;
            }
            '÷' => {
                tokens.push(Token::Op('/'));
                i += 1;
            }
            '−' => {
                tokens.push(Token::Op('-'));
                i += 1;
            }
            other => return Err(format!("`{other}` is not something this can compute")),
        }
    }
    // `**` as a power, as many languages write it
    let mut merged: Vec<Token> = Vec::with_capacity(tokens.len());
    for t in tokens {
        if t == Token::Op('*') && merged.last() == Some(&Token::Op('*')) {
            merged.pop();
            merged.push(Token::Op('^'));
        } else {
            merged.push(t);
        }
    }
    Ok(merged)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Token::Op(op)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(format!("nested more than {MAX_DEPTH} levels deep"))
        } else {
            Ok(())
        }
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            if self.eat('+') {
                value += self.term()?;
            } else if self.eat('-') {
                value -= self.term()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            if self.eat('*') {
                value *= self.unary()?;
            } else if self.eat('/') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                value /= d;
            } else if self.eat('%') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("remainder of a division by zero".into());
                }
                value %= d;
            } else {
                return Ok(value);
            }
        }
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.deeper()?;
        let value = if self.eat('-') {
            -self.unary()?
        } else if self.eat('+') {
            self.unary()?
        } else {
            self.power()?
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.postfix()?;
        if self.eat('^') {
            let exponent = self.unary()?;
            return finite(base.powf(exponent));
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<f64, String> {
        let value = self.primary()?;
        // `15%` alone or before an operator that cannot start a number: a percentage
        let percent = self.peek() == Some(&Token::Op('%'))
            && !matches!(
                self.tokens.get(self.at + 1),
                Some(Token::Number(_) | Token::Name(_)) | Some(Token::Op('(' | '-' | '+'))
            );
        if percent {
            self.at += 1;
            return Ok(value / 100.0);
        }
        Ok(value)
    }

    fn primary(&mut self) -> Result<f64, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(n),
            Some(Token::Op('(')) => {
                self.deeper()?;
                let value = self.expr()?;
                if !self.eat(')') {
                    return Err("a `(` is not closed".into());
                }
                self.depth -= 1;
                Ok(value)
            }
            Some(Token::Name(name)) => match name.as_str() {
                "pi" | "π" => Ok(std::f64::consts::PI),
                "e" => Ok(std::f64::consts::E),
                _ => self.call(&name),
            },
            Some(other) => Err(format!("unexpected {}", other.describe())),
            None => Err("the expression ends too early".into()),
        }
    }

    fn call(&mut self, name: &str) -> Result<f64, String> {
        let arity = match name {
            "sqrt" | "abs" | "round" | "floor" | "ceil" | "ln" | "log10" | "log2" | "log"
            | "exp" | "sin" | "cos" | "tan" => 1,
            "min" | "max" | "pow" => 2,
            _ => return Err(format!("`{name}` is not a known function or constant")),
        };
        if !self.eat('(') {
            return Err(format!("`{name}` needs its argument in parentheses"));
        }
        self.deeper()?;
        let mut args = vec![self.expr()?];
        while self.eat(',') {
            args.push(self.expr()?);
        }
        if !self.eat(')') {
            return Err(format!("`{name}(` is not closed"));
        }
        self.depth -= 1;
        if args.len() != arity {
            return Err(format!(
                "`{name}` takes {arity} argument{}",
                if arity == 1 { "" } else { "s" }
            ));
        }
        let x = args[0];
        let value = match name {
            "sqrt" if x < 0.0 => return Err("the square root of a negative number".into()),
            "sqrt" => x.sqrt(),
            "abs" => x.abs(),
            "round" => x.round(),
            "floor" => x.floor(),
            "ceil" => x.ceil(),
            "ln" | "log" | "log10" | "log2" if x <= 0.0 => {
                return Err("the logarithm of a number that is not positive".into());
            }
            "ln" | "log" => x.ln(),
            "log10" => x.log10(),
            "log2" => x.log2(),
            "exp" => x.exp(),
            "sin" => x.sin(),
            "cos" => x.cos(),
            "tan" => x.tan(),
            "min" => x.min(args[1]),
            "max" => x.max(args[1]),
            _ => x.powf(args[1]),
        };
        finite(value)
    }
}

fn finite(x: f64) -> Result<f64, String> {
    if x.is_finite() {
        Ok(if x == 0.0 { 0.0 } else { x })
    } else {
        Err("the result is too large (or not a number)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calc(s: &str) -> String {
        format_number(evaluate(s).unwrap())
    }

    #[test]
    fn arithmetic_with_precedence() {
        assert_eq!(calc("1 + 2 * 3"), "7");
        assert_eq!(calc("(1 + 2) * 3"), "9");
        assert_eq!(calc("2 ^ 3 ^ 2"), "512");
        assert_eq!(calc("2 ** 10"), "1024");
        assert_eq!(calc("-2 ^ 2"), "-4");
        assert_eq!(calc("7 % 3"), "1");
        assert_eq!(calc("10 / 4"), "2.5");
        assert_eq!(calc("1 / 3"), "0.333333333333");
        assert_eq!(calc("0.1 + 0.2"), "0.3");
        assert_eq!(calc("1,000,000 / 8"), "125000");
        assert_eq!(calc("1.5e3 + 2E-1"), "1500.2");
        assert_eq!(calc("12 × 7 ÷ 2 − 1"), "41");
        assert_eq!(calc("15% * 80"), "12");
        assert_eq!(calc("200 * 15%"), "30");
        assert_eq!(calc("sqrt(16) + max(2, 3) + round(2.5)"), "10");
        assert_eq!(calc("2 * pi"), "6.28318530718");
        assert_eq!(calc("min(1,22)"), "1");
        assert_eq!(calc("-0"), "0");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("1 / 0", "division by zero"),
            ("", "nothing to compute"),
            ("(1 + 2", "not closed"),
            ("1 +", "ends too early"),
            ("2 3", "unexpected number 3"),
            ("system(1)", "not a known function"),
            ("x + 1", "not a known function"),
            ("sqrt(-1)", "negative"),
            ("10 ^ 400", "too large"),
            ("1 $ 2", "`$`"),
            ("min(1)", "takes 2 arguments"),
        ];
        for (expr, needle) in cases {
            let e = evaluate(expr).unwrap_err();
            assert!(e.contains(needle), "{expr}: {e}");
        }
    }

    #[test]
    fn depth_and_length_are_bounded() {
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert!(evaluate(&deep).unwrap_err().contains("nested"));
        let ok = format!("{}1{}", "(".repeat(20), ")".repeat(20));
        assert_eq!(evaluate(&ok), Ok(1.0));
        assert!(evaluate(&"-".repeat(400)).is_err());
        assert!(
            evaluate(&"1+".repeat(300))
                .unwrap_err()
                .contains("longer than")
        );
    }
}
