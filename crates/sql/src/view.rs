//! Views (`CREATE [OR REPLACE] VIEW`, `DROP VIEW`): how the catalog keeps them.
//!
//! A view is a relation of the catalog like a sequence: an engine table of its name that holds
//! no row, whose columns are the view's output columns (name and type) followed by the hidden
//! row id, and whose table options hold the query text (`view`) and the relations it reads
//! (`view_depends_on`, space-separated). So a view is in the catalog of every partition, its
//! digest and snapshots, shares the name space with tables (42P07), and is created and dropped
//! by the ordinary DDL operations at one point of the order. The planner expands a view named
//! in FROM as a derived table planned from its text (`plan::view`); nothing ever reads the
//! empty table.

use crate::catalog::{Catalog, TableEntry};
use crate::error::SqlError;

/// The option holding a view's query text.
pub const VIEW_OPTION: &str = "view";
/// The option holding the relations a view reads, space-separated (names are quoted when
/// they hold a space).
pub const DEPENDS_OPTION: &str = "view_depends_on";

/// A view's query text, if the relation is a view.
pub fn query_text(entry: &TableEntry) -> Option<&str> {
    entry
        .schema
        .options
        .iter()
        .find(|(key, _)| key == VIEW_OPTION)
        .map(|(_, value)| value.as_str())
}

pub fn is_view(entry: &TableEntry) -> bool {
    query_text(entry).is_some()
}

/// The relations a view reads directly (tables, sequences and other views).
pub fn depends_on(entry: &TableEntry) -> Vec<String> {
    entry
        .schema
        .options
        .iter()
        .find(|(key, _)| key == DEPENDS_OPTION)
        .map(|(_, value)| decode_names(value))
        .unwrap_or_default()
}

/// Names joined for `DEPENDS_OPTION`: each one's characters with space and backslash
/// escaped by a backslash.
pub fn encode_names(names: &[String]) -> String {
    names
        .iter()
        .map(|name| name.replace('\\', "\\\\").replace(' ', "\\ "))
        .collect::<Vec<_>>()
        .join(" ")
}

fn decode_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for character in text.chars() {
        match (escaped, character) {
            (true, _) => {
                current.push(character);
                escaped = false;
            }
            (false, '\\') => escaped = true,
            (false, ' ') => names.push(std::mem::take(&mut current)),
            (false, _) => current.push(character),
        }
    }
    if !current.is_empty() {
        names.push(current);
    }
    names
}

/// Every view that reads `relation`, directly or through other views, in the order they must
/// be dropped (a view before the views it reads).
pub fn dependents(catalog: &dyn Catalog, relation: &str) -> Vec<String> {
    let views: Vec<(String, Vec<String>)> = catalog
        .table_names()
        .into_iter()
        .filter_map(|name| catalog.table(&name))
        .filter(is_view)
        .map(|entry| (entry.schema.name.clone(), depends_on(&entry)))
        .collect();
    let mut found: Vec<String> = Vec::new();
    let mut frontier = vec![relation.to_string()];
    while let Some(target) = frontier.pop() {
        for (view, reads) in &views {
            if reads.contains(&target) && !found.contains(view) && view != relation {
                found.push(view.clone());
                frontier.push(view.clone());
            }
        }
    }
    // Found breadth-first from the relation: the farthest dependents are dropped first.
    found.reverse();
    found
}

/// PostgreSQL's NOTICE when DROP … CASCADE drops views too.
pub fn cascade_notice(views: &[String]) -> SqlError {
    match views {
        [view] => SqlError::new("00000", format!("drop cascades to view {view}")),
        _ => SqlError::new(
            "00000",
            format!("drop cascades to {} other objects", views.len()),
        )
        .with_detail(
            views
                .iter()
                .map(|view| format!("drop cascades to view {view}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_names_round_trip_through_their_encoding() {
        let names = vec!["t".to_string(), "odd name".into(), "back\\slash".into()];
        assert_eq!(decode_names(&encode_names(&names)), names);
        assert!(decode_names("").is_empty());
    }
}
