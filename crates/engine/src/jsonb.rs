//! JSONB: JSON values stored in PostgreSQL's canonical jsonb text (`Value::Jsonb`), so that
//! equal documents are equal strings and replicas store identical bytes. Canonical means what
//! PostgreSQL's `jsonb_out` prints: object keys sorted by length then bytes, the last of
//! duplicate keys kept, `", "` and `": "` as separators, numbers as NUMERIC prints them
//! (`1e2` is `100`, `2.50` stays `2.50`), strings with JSON's escapes.
//!
//! The operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, `?|`, `?&`) and functions parse
//! the stored text into a `Json` tree. The parser is iterative over nesting only through
//! recursion bounded by `DEPTH_MAX`, so untrusted text cannot overflow the stack.
//! Pure functions; every failure is a `JsonError`, never a panic.

use std::fmt::Write as _;

/// Deepest nesting accepted (PostgreSQL's limit is its stack depth).
pub const DEPTH_MAX: usize = 256;

/// A parsed JSON value. Objects keep their keys in jsonb order without duplicates.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number's canonical text.
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// Why text is not JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// What was wrong, as PostgreSQL's DETAIL says it.
    pub detail: String,
}

fn fail<T>(detail: impl Into<String>) -> Result<T, JsonError> {
    Err(JsonError {
        detail: detail.into(),
    })
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_blanks(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        if depth > DEPTH_MAX {
            return fail(format!("JSON nested deeper than {DEPTH_MAX} levels"));
        }
        self.skip_blanks();
        match self.bytes.get(self.at) {
            None => fail("The input string ended unexpectedly."),
            Some(b'{') => {
                self.at += 1;
                let mut members: Vec<(String, Json)> = Vec::new();
                self.skip_blanks();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                loop {
                    self.skip_blanks();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return fail("Expected string.");
                    }
                    let key = self.string()?;
                    self.skip_blanks();
                    if self.bytes.get(self.at) != Some(&b':') {
                        return fail("Expected \":\".");
                    }
                    self.at += 1;
                    let value = self.value(depth + 1)?;
                    members.push((key, value));
                    self.skip_blanks();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Object(canonical_members(members)));
                        }
                        _ => return fail("Expected \",\" or \"}\"."),
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut elements = Vec::new();
                self.skip_blanks();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(elements));
                }
                loop {
                    elements.push(self.value(depth + 1)?);
                    self.skip_blanks();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Array(elements));
                        }
                        _ => return fail("Expected \",\" or \"]\"."),
                    }
                }
            }
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                for (word, value) in [
                    ("true", Json::Bool(true)),
                    ("false", Json::Bool(false)),
                    ("null", Json::Null),
                ] {
                    if self.bytes[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(value);
                    }
                }
                fail("Token is invalid.")
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u32::from_str_radix(digits, 16).ok());
        match digits {
            Some(code) => {
                self.at += 4;
                Ok(code)
            }
            None => fail("\"\\u\" must be followed by four hexadecimal digits."),
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        assert_eq!(self.bytes.get(self.at), Some(&b'"'));
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&byte) = self.bytes.get(self.at) else {
                return fail("The input string ended unexpectedly.");
            };
            self.at += 1;
            match byte {
                b'"' => break,
                0..=0x1f => {
                    return fail(format!(
                        "Character with value 0x{byte:02x} must be escaped."
                    ))
                }
                b'\\' => {
                    let Some(&escape) = self.bytes.get(self.at) else {
                        return fail("The input string ended unexpectedly.");
                    };
                    self.at += 1;
                    let simple = match escape {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return fail("Escape sequence is invalid."),
                    };
                    if let Some(simple) = simple {
                        out.push(simple);
                        continue;
                    }
                    let mut code = self.hex4()?;
                    if (0xd800..0xdc00).contains(&code) {
                        if !self.bytes[self.at..].starts_with(b"\\u") {
                            return fail(
                                "Unicode high surrogate must not follow a high surrogate.",
                            );
                        }
                        self.at += 2;
                        let low = self.hex4()?;
                        if !(0xdc00..0xe000).contains(&low) {
                            return fail("Unicode low surrogate must follow a high surrogate.");
                        }
                        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                    }
                    if code == 0 {
                        return fail("\\u0000 cannot be converted to text.");
                    }
                    let Some(character) = char::from_u32(code) else {
                        return fail("Unicode low surrogate must follow a high surrogate.");
                    };
                    let mut buffer = [0u8; 4];
                    out.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes());
                }
                other => out.push(other),
            }
        }
        // The input was a &str and escapes produce whole characters, so this is UTF-8.
        String::from_utf8(out).or_else(|_| fail("invalid UTF-8"))
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.at;
        let digits = |parser: &mut Parser| {
            let from = parser.at;
            while parser.bytes.get(parser.at).is_some_and(u8::is_ascii_digit) {
                parser.at += 1;
            }
            parser.at - from
        };
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let integer = digits(self);
        let leading_zero = integer > 1 && self.bytes[self.at - integer] == b'0';
        if integer == 0 || leading_zero {
            return fail("Token is invalid.");
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return fail("Token is invalid.");
            }
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return fail("Token is invalid.");
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or("0");
        Ok(Json::Number(canonical_number(text)))
    }
}

/// A JSON number as PostgreSQL's NUMERIC prints it (`1e2` → `100`, `-0` → `0`, `2.50`
/// kept); beyond the exact decimals of `crate::numeric`, the text as written.
fn canonical_number(text: &str) -> String {
    match crate::numeric::parse(text) {
        Ok(decimal) if decimal.is_zero() => {
            let mut zero = decimal;
            zero.set_sign_positive(true);
            zero.to_string()
        }
        Ok(decimal) => decimal.to_string(),
        Err(_) => text.to_string(),
    }
}

/// Object members in jsonb order: keys by length then bytes, the last of duplicates kept.
fn canonical_members(members: Vec<(String, Json)>) -> Vec<(String, Json)> {
    let mut sorted: Vec<(usize, (String, Json))> = members.into_iter().enumerate().collect();
    sorted.sort_by(|(at_a, (a, _)), (at_b, (b, _))| {
        (a.len(), a.as_bytes(), std::cmp::Reverse(*at_a)).cmp(&(
            b.len(),
            b.as_bytes(),
            std::cmp::Reverse(*at_b),
        ))
    });
    let mut out: Vec<(String, Json)> = Vec::with_capacity(sorted.len());
    for (_, (key, value)) in sorted {
        if out.last().is_some_and(|(last, _)| *last == key) {
            continue;
        }
        out.push((key, value));
    }
    out
}

/// Parses JSON text (`jsonb_in`).
pub fn parse(text: &str) -> Result<Json, JsonError> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = parser.value(0)?;
    parser.skip_blanks();
    if parser.at != parser.bytes.len() {
        return fail("Expected end of input, but found more.");
    }
    Ok(value)
}

/// Parses and prints JSON text canonically (what a JSONB value stores).
pub fn canonical(text: &str) -> Result<String, JsonError> {
    parse(text).map(|json| json.to_text())
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            control if u32::from(control) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(control));
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

impl Json {
    /// `jsonb_out`'s text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
            Json::Number(text) => out.push_str(text),
            Json::String(text) => write_string(out, text),
            Json::Array(elements) => {
                out.push('[');
                for (at, element) in elements.iter().enumerate() {
                    if at > 0 {
                        out.push_str(", ");
                    }
                    element.write(out);
                }
                out.push(']');
            }
            Json::Object(members) => {
                out.push('{');
                for (at, (key, value)) in members.iter().enumerate() {
                    if at > 0 {
                        out.push_str(", ");
                    }
                    write_string(out, key);
                    out.push_str(": ");
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// `->>`'s text of a value: a string unquoted, JSON null as SQL NULL (`None`), anything
    /// else as its JSON text.
    pub fn to_unquoted(&self) -> Option<String> {
        match self {
            Json::Null => None,
            Json::String(text) => Some(text.clone()),
            other => Some(other.to_text()),
        }
    }

    /// `jsonb_typeof`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    /// `-> 'key'`: the member of an object.
    pub fn field(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }

    /// `-> n`: the element of an array, counting from the end when negative.
    pub fn element(&self, index: i64) -> Option<&Json> {
        let Json::Array(elements) = self else {
            return None;
        };
        let length = i64::try_from(elements.len()).ok()?;
        let index = if index < 0 { length + index } else { index };
        usize::try_from(index).ok().and_then(|at| elements.get(at))
    }

    /// `#> path`: each step a key of an object or an index of an array.
    pub fn path(&self, steps: &[String]) -> Option<&Json> {
        let mut current = self;
        for step in steps {
            current = match current {
                Json::Object(_) => current.field(step)?,
                Json::Array(_) => current.element(step.trim().parse().ok()?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// `?`: a key of an object, or a string element of an array (or the string itself).
    pub fn has_key(&self, key: &str) -> bool {
        match self {
            Json::Object(_) => self.field(key).is_some(),
            Json::Array(elements) => elements
                .iter()
                .any(|element| matches!(element, Json::String(text) if text == key)),
            Json::String(text) => text == key,
            _ => false,
        }
    }

    /// `@>`: PostgreSQL's containment (`JsonbDeepContains`): objects contain objects whose
    /// every member they contain; arrays contain arrays whose every element some element
    /// contains; a top-level array contains a scalar it holds; scalars are equal.
    pub fn contains(&self, other: &Json) -> bool {
        self.contains_at(other, true)
    }

    fn contains_at(&self, other: &Json, top: bool) -> bool {
        match (self, other) {
            (Json::Object(_), Json::Object(wanted)) => wanted.iter().all(|(key, value)| {
                self.field(key)
                    .is_some_and(|held| held.contains_at(value, false))
            }),
            (Json::Array(held), Json::Array(wanted)) => wanted.iter().all(|value| {
                held.iter().any(|element| match value {
                    Json::Object(_) | Json::Array(_) => element.contains_at(value, false),
                    scalar => element == scalar,
                })
            }),
            (Json::Array(held), scalar) if top && !matches!(scalar, Json::Object(_)) => {
                held.iter().any(|element| element == scalar)
            }
            (Json::Object(_) | Json::Array(_), _) | (_, Json::Object(_) | Json::Array(_)) => false,
            (held, wanted) => held == wanted,
        }
    }
}

/// Reads a PostgreSQL text array (`{a,b,"c d"}`) into its elements, for `#>` paths;
/// `None` when it is not one.
pub fn text_array(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut elements = Vec::new();
    if inner.trim().is_empty() {
        return Some(elements);
    }
    let mut characters = inner.chars().peekable();
    loop {
        while characters.peek().is_some_and(|c| c.is_whitespace()) {
            characters.next();
        }
        let mut element = String::new();
        if characters.peek() == Some(&'"') {
            characters.next();
            loop {
                match characters.next()? {
                    '"' => break,
                    '\\' => element.push(characters.next()?),
                    other => element.push(other),
                }
            }
            while characters.peek().is_some_and(|c| c.is_whitespace()) {
                characters.next();
            }
        } else {
            while let Some(&next) = characters.peek().filter(|c| **c != ',') {
                element.push(next);
                characters.next();
            }
            element = element.trim_end().to_string();
        }
        elements.push(element);
        match characters.next() {
            None => return Some(elements),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

/// PostgreSQL's binary jsonb format (`jsonb_send`): version byte 1, then the text.
pub fn to_binary(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.push(1);
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// A JSON string of text (`to_jsonb(text)`).
pub fn quoted(text: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outputs are PostgreSQL 15's `jsonb_out` for the same inputs.
    #[test]
    fn canonical_text_is_postgresql_jsonb_output() {
        for (input, output) in [
            (
                r#"{"b": [1, 2.50, 1e2, -0, true, null], "a": {"bb": "x", "c": 1}, "a": 3, "aaa": ""}"#,
                r#"{"a": 3, "b": [1, 2.50, 100, 0, true, null], "aaa": ""}"#,
            ),
            (r#"  [ ]  "#, "[]"),
            (r#"{}"#, "{}"),
            (r#""a\nb\u00e9\"\\\/""#, r#""a\nbé\"\\/""#),
            (r#""\ud83d\ude00""#, "\"😀\""),
            ("-1.5E-3", "-0.0015"),
            (r#"{"aa":1,"b":2,"a":3}"#, r#"{"a": 3, "b": 2, "aa": 1}"#),
        ] {
            assert_eq!(canonical(input).as_deref(), Ok(output), "{input}");
        }
        for bad in [
            r#"{"a" 1}"#,
            "",
            "[1,]",
            "01",
            "1.",
            "tru",
            "\"\u{1}\"",
            r#""\x""#,
            "[1] 2",
            r#""\u0000""#,
            r#""\ud83d""#,
            "{1: 2}",
        ] {
            assert!(canonical(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(DEPTH_MAX + 2);
        assert!(
            canonical(&deep).is_err(),
            "deep nesting is refused, not a stack overflow"
        );
    }

    #[test]
    fn operators_answer_as_postgresql() {
        let json = |text: &str| parse(text).unwrap();
        let document = json(r#"{"a": {"b": [5, 6]}, "k": "x", "n": null}"#);
        assert_eq!(
            document.field("k").and_then(Json::to_unquoted).as_deref(),
            Some("x")
        );
        assert_eq!(document.field("n").and_then(Json::to_unquoted), None);
        assert_eq!(json("[1,2,3]").element(-1), Some(&json("3")));
        assert_eq!(json("[1,2,3]").element(3), None);
        let path = text_array("{a,b,1}").unwrap();
        assert_eq!(document.path(&path), Some(&json("6")));
        assert_eq!(text_array(r#"{"a b", c}"#).unwrap(), ["a b", "c"]);
        assert!(json(r#"{"a":1,"b":2}"#).contains(&json(r#"{"a":1}"#)));
        assert!(!json(r#"{"a":1}"#).contains(&json(r#"{"a":1,"b":2}"#)));
        assert!(json("[1,[2]]").contains(&json("[[2]]")));
        assert!(json("[1,2]").contains(&json("1")));
        assert!(!json("[[1],2]").contains(&json("[1]")));
        assert!(json(r#"["a","b"]"#).has_key("a"));
        assert!(!json(r#"{"a":{"b":1}}"#).has_key("b"));
        assert_eq!(json("1.5").type_name(), "number");
    }
}
