//! COPY … FROM STDIN in PostgreSQL's text format: the data the server collected from CopyData
//! messages → engine inserts.

use crate::error::{sqlstate, SqlError};
use crate::plan::{CommandKind, CopyIn, Execution, Finish, Routing};
use crate::types::decode_text;
use engine::operation::INSERT_ROWS_MAX;
use engine::{OnConflict, Operation, Value};

fn bad_format(line: usize, message: impl Into<String>) -> SqlError {
    SqlError::new(sqlstate::BAD_COPY_FILE_FORMAT, message)
        .with_detail(format!("COPY data line {line}"))
}

/// Undoes the text format's backslash escapes in one field.
fn unescape(field: &str, line: usize) -> Result<String, SqlError> {
    let mut out = String::with_capacity(field.len());
    let mut characters = field.chars().peekable();
    while let Some(character) = characters.next() {
        if character != '\\' {
            out.push(character);
            continue;
        }
        let Some(escaped) = characters.next() else {
            return Err(bad_format(line, "end-of-copy marker corrupt"));
        };
        match escaped {
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            'x' => {
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match characters.peek().and_then(|c| c.to_digit(16)) {
                        Some(digit) => {
                            value = value * 16 + digit;
                            characters.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    out.push('x');
                } else {
                    out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
                }
            }
            '0'..='7' => {
                let mut value = escaped.to_digit(8).expect("octal digit");
                for _ in 0..2 {
                    match characters.peek().and_then(|c| c.to_digit(8)) {
                        Some(digit) => {
                            value = value * 8 + digit;
                            characters.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

impl CopyIn {
    /// The engine inserts for the copied data (all CopyData payloads concatenated), in chunks
    /// of at most `INSERT_ROWS_MAX` rows, as one execution (one statement).
    pub fn execution(&self, data: &[u8]) -> Result<Execution, SqlError> {
        let rows = self.rows(data)?;
        Ok(self.execution_of(rows.chunks(INSERT_ROWS_MAX)))
    }

    /// The copied data as executions of at most `rows_per_statement` rows each (at least one,
    /// empty if there is no row), for a front end that runs a large COPY as several bounded
    /// statements inside one transaction, so that the COPY stays atomic while no statement is
    /// large. Every row is parsed first: bad data fails the COPY before anything is sent.
    pub fn executions(
        &self,
        data: &[u8],
        rows_per_statement: usize,
    ) -> Result<Vec<Execution>, SqlError> {
        assert!(rows_per_statement > 0, "a statement holds rows");
        let rows = self.rows(data)?;
        if rows.is_empty() {
            return Ok(vec![self.execution_of(std::iter::empty())]);
        }
        let per = rows_per_statement.min(INSERT_ROWS_MAX);
        Ok(rows
            .chunks(per)
            .map(|chunk| self.execution_of(std::iter::once(chunk)))
            .collect())
    }

    fn execution_of<'a>(&self, chunks: impl Iterator<Item = &'a [Vec<Value>]>) -> Execution {
        let operations = chunks
            .map(|chunk| Operation::Insert {
                table: self.table.clone(),
                columns: self.columns.clone(),
                rows: chunk.to_vec(),
                on_conflict: OnConflict::Error,
            })
            .collect();
        Execution {
            operations,
            routing: match self.key_position {
                Some(position) => Routing::RowsByKey { position },
                None => Routing::NewRowIds,
            },
            finish: Finish::Command(CommandKind::Copy),
            created_table: None,
            notices: Vec::new(),
        }
    }

    /// The copied data's rows, parsed and typed.
    fn rows(&self, data: &[u8]) -> Result<Vec<Vec<Value>>, SqlError> {
        let text = std::str::from_utf8(data)
            .map_err(|_| SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\""))?;
        let mut rows: Vec<Vec<Value>> = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let number = index + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line == "\\." {
                break;
            }
            if line.is_empty() && index + 1 == text.split('\n').count() {
                break;
            }
            let fields: Vec<&str> = line.split(self.delimiter).collect();
            if fields.len() < self.columns.len() {
                return Err(bad_format(
                    number,
                    format!("missing data for column \"{}\"", self.columns[fields.len()]),
                ));
            }
            if fields.len() > self.columns.len() {
                return Err(bad_format(number, "extra data after last expected column"));
            }
            let mut row = Vec::with_capacity(fields.len());
            for ((field, data_type), column) in fields.iter().zip(&self.types).zip(&self.columns) {
                if *field == self.null {
                    row.push(Value::Null);
                    continue;
                }
                let value =
                    decode_text(&unescape(field, number)?, *data_type).map_err(|error| {
                        error.with_detail(format!(
                            "COPY {}, line {number}, column {column}",
                            self.table
                        ))
                    })?;
                row.push(value);
            }
            rows.push(row);
        }
        Ok(rows)
    }
}
