//! A small regular-expression matcher for the `~` operator that psql's catalog queries use
//! (`relname ~ '^(users)$'`, `nspname !~ '^pg_toast'`). Supported: literals, `\` escapes, `.`,
//! `[...]` classes (ranges, `^` negation), the quantifiers `*`, `+`, `?`, anchors `^` and `$`,
//! and parentheses for grouping single-branch text without a quantifier. Alternation and
//! quantified groups are refused (0A000). Matching simulates the automaton over the text: no
//! recursion, time O(text × pattern).

use crate::error::SqlError;

#[derive(Clone, Debug, PartialEq)]
enum Atom {
    Literal(char),
    Any,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
}

impl Atom {
    fn accepts(&self, character: char) -> bool {
        match self {
            Atom::Literal(literal) => *literal == character,
            Atom::Any => true,
            Atom::Class { ranges, negated } => {
                ranges
                    .iter()
                    .any(|(low, high)| (*low..=*high).contains(&character))
                    != *negated
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Repeat {
    One,
    /// `*`.
    Many,
    /// `?`.
    Optional,
}

struct Pattern {
    tokens: Vec<(Atom, Repeat)>,
    anchored_start: bool,
    anchored_end: bool,
}

fn compile(pattern: &str) -> Result<Pattern, SqlError> {
    let mut characters = pattern.chars().peekable();
    let mut tokens: Vec<(Atom, Repeat)> = Vec::new();
    let anchored_start = characters.peek() == Some(&'^');
    if anchored_start {
        characters.next();
    }
    let mut anchored_end = false;
    while let Some(character) = characters.next() {
        let atom = match character {
            '$' if characters.peek().is_none() => {
                anchored_end = true;
                continue;
            }
            '(' | ')' => {
                if character == ')' && matches!(characters.peek(), Some('*' | '+' | '?')) {
                    return Err(SqlError::unsupported(
                        "quantified groups in regular expressions",
                    ));
                }
                continue;
            }
            '|' => return Err(SqlError::unsupported("alternation in regular expressions")),
            '.' => Atom::Any,
            '\\' => Atom::Literal(characters.next().unwrap_or('\\')),
            '[' => {
                let negated = characters.peek() == Some(&'^');
                if negated {
                    characters.next();
                }
                let mut ranges = Vec::new();
                loop {
                    match characters.next() {
                        None => {
                            return Err(SqlError::syntax("unterminated [ in regular expression"))
                        }
                        Some(']') if !ranges.is_empty() => break,
                        Some(low) => {
                            let low = if low == '\\' {
                                characters.next().unwrap_or('\\')
                            } else {
                                low
                            };
                            if characters.peek() == Some(&'-') {
                                characters.next();
                                match characters.next() {
                                    Some(']') => {
                                        ranges.push((low, low));
                                        ranges.push(('-', '-'));
                                        break;
                                    }
                                    Some(high) => ranges.push((low, high)),
                                    None => {
                                        return Err(SqlError::syntax(
                                            "unterminated [ in regular expression",
                                        ))
                                    }
                                }
                            } else {
                                ranges.push((low, low));
                            }
                        }
                    }
                }
                Atom::Class { ranges, negated }
            }
            '*' | '+' | '?' => {
                return Err(SqlError::syntax(
                    "quantifier without operand in regular expression",
                ))
            }
            literal => Atom::Literal(literal),
        };
        match characters.peek() {
            Some('*') => {
                characters.next();
                tokens.push((atom, Repeat::Many));
            }
            Some('+') => {
                characters.next();
                tokens.push((atom.clone(), Repeat::One));
                tokens.push((atom, Repeat::Many));
            }
            Some('?') => {
                characters.next();
                tokens.push((atom, Repeat::Optional));
            }
            _ => tokens.push((atom, Repeat::One)),
        }
    }
    Ok(Pattern {
        tokens,
        anchored_start,
        anchored_end,
    })
}

/// Whether `text` contains a match of `pattern` (POSIX `~` semantics for the subset).
pub fn matches(pattern: &str, text: &str) -> Result<bool, SqlError> {
    let pattern = compile(pattern)?;
    let count = pattern.tokens.len();
    let close = |states: &mut Vec<bool>| {
        for at in 0..count {
            if states[at] && pattern.tokens[at].1 != Repeat::One {
                states[at + 1] = true;
            }
        }
    };
    let accepted =
        |states: &[bool], at_end: bool| states[count] && (at_end || !pattern.anchored_end);
    let mut states = vec![false; count + 1];
    states[0] = true;
    close(&mut states);
    let characters: Vec<char> = text.chars().collect();
    for (position, character) in characters.iter().enumerate() {
        if accepted(&states, false) {
            return Ok(true);
        }
        let mut next = vec![false; count + 1];
        for at in 0..count {
            if states[at] && pattern.tokens[at].0.accepts(*character) {
                match pattern.tokens[at].1 {
                    Repeat::Many => next[at] = true,
                    Repeat::One | Repeat::Optional => next[at + 1] = true,
                }
            }
        }
        if !pattern.anchored_start {
            next[0] = true;
        }
        close(&mut next);
        states = next;
        let _ = position;
    }
    Ok(accepted(&states, true))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn psql_patterns_match_as_in_postgres() {
        assert!(matches("^(users)$", "users").unwrap());
        assert!(!matches("^(users)$", "users2").unwrap());
        assert!(matches("^pg_toast", "pg_toast_1").unwrap());
        assert!(!matches("^pg_toast", "public").unwrap());
        assert!(matches("^(us.*)$", "users").unwrap());
        assert!(matches("se", "users").unwrap());
        assert!(matches("^[a-c]+x?$", "abcab").unwrap());
        assert!(!matches("^[^a-c]+$", "abd").unwrap());
        assert!(matches("", "anything").unwrap());
    }

    #[test]
    fn unsupported_regular_expressions_are_refused() {
        assert_eq!(matches("a|b", "a").unwrap_err().code, "0A000");
        assert_eq!(matches("(ab)*", "a").unwrap_err().code, "0A000");
        assert_eq!(matches("[ab", "a").unwrap_err().code, "42601");
    }
}
