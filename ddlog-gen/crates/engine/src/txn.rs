//! Input relation contents, primary-key indexes and atomic application of updates.
//!
//! Each input relation is a set of rows or, if it has a primary key, a key → row index
//! (and no set: the rows are the index's values; a second copy of every keyed input row
//! would be memory in proportion to the inputs, for nothing the engine reads).
//! [`Inputs::prepare`] runs a transaction's updates in order against an overlay, so a
//! failing update leaves everything untouched; [`Inputs::commit`] then applies the net
//! per-row changes and returns them for the dataflow.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use rulec::ir::{Program, RelId, Role};
use rulec::script::Update;
use rulec::value::{Row, Value};

use crate::body::eval_ro;
use crate::format::{format_record, format_value};
use crate::Error;

/// One input relation's rows: a set, or for a relation with a primary key its index.
enum Table {
    Rows(HashSet<Row>),
    Index(HashMap<Value, Row>),
}

impl Table {
    /// The rows.
    fn iter(&self) -> Box<dyn Iterator<Item = &Row> + '_> {
        match self {
            Table::Rows(rows) => Box::new(rows.iter()),
            Table::Index(index) => Box::new(index.values()),
        }
    }
}

/// All input relations.
pub struct Inputs {
    tables: Vec<Option<Table>>,
}

/// A validated transaction: net row changes and the key index changes.
pub struct Overlay {
    /// Net change per relation and row: +1 inserted, -1 deleted (0 = cancelled).
    net: Vec<HashMap<Row, isize>>,
    /// Key → row (or `None` if deleted) per relation with a primary key.
    keys: Vec<HashMap<Value, Option<Row>>>,
}

impl Inputs {
    /// Empty input relations for `prog`.
    pub fn new(prog: &Program) -> Inputs {
        let tables = prog
            .relations
            .iter()
            .map(|r| {
                (r.role == Role::Input).then(|| match r.primary_key {
                    Some(_) => Table::Index(HashMap::default()),
                    None => Table::Rows(HashSet::default()),
                })
            })
            .collect();
        Inputs { tables }
    }

    /// Rows of input relation `rel`, if it is one.
    pub fn rows(&self, rel: RelId) -> Option<impl Iterator<Item = &Row>> {
        self.tables
            .get(rel)
            .and_then(Option::as_ref)
            .map(Table::iter)
    }

    /// Validate and net out `updates` without changing anything.
    pub fn prepare(
        &self,
        prog: &Program,
        updates: &[Update],
        errors: &AtomicU64,
    ) -> Result<Overlay, Error> {
        let mut tx = Tx {
            prog,
            inputs: self,
            ov: Overlay {
                net: vec![HashMap::default(); prog.relations.len()],
                keys: vec![HashMap::default(); prog.relations.len()],
            },
            errors,
        };
        let mut per_rel = vec![0usize; prog.relations.len()];
        for u in updates {
            let (Update::Insert(rel, _) | Update::InsertOrUpdate(rel, _) | Update::Delete(rel, _)) =
                u
            else {
                continue;
            };
            if let Some(n) = per_rel.get_mut(*rel) {
                *n += 1;
            }
        }
        for (net, n) in tx.ov.net.iter_mut().zip(per_rel) {
            net.reserve(n);
        }
        for u in updates {
            tx.update(u)?;
        }
        Ok(tx.ov)
    }

    /// Apply a prepared overlay (see [`Overlay::changes`] for what it changes).
    pub fn commit(&mut self, ov: Overlay) {
        for ((table, rows), keys) in self.tables.iter_mut().zip(ov.net).zip(ov.keys) {
            match table {
                Some(Table::Rows(set)) => {
                    set.reserve(rows.len());
                    for (row, d) in rows {
                        if d > 0 {
                            set.insert(row);
                        } else if d < 0 {
                            set.remove(&row);
                        }
                    }
                }
                Some(Table::Index(index)) => {
                    for (key, row) in keys {
                        match row {
                            Some(r) => index.insert(key, r),
                            None => index.remove(&key),
                        };
                    }
                }
                None => {}
            }
        }
    }
}

impl Overlay {
    /// The net changes, deletions first (so a replay never sees two rows with one key).
    pub fn changes(&self) -> Vec<(RelId, Row, isize)> {
        let (mut changes, inserts): (Vec<_>, Vec<_>) = self
            .net
            .iter()
            .enumerate()
            .flat_map(|(rel, rows)| {
                rows.iter()
                    .filter(|(_, d)| **d != 0)
                    .map(move |(row, d)| (rel, row.clone(), *d))
            })
            .partition(|c| c.2 < 0);
        changes.extend(inserts);
        changes
    }
}

struct Tx<'a> {
    prog: &'a Program,
    inputs: &'a Inputs,
    ov: Overlay,
    errors: &'a AtomicU64,
}

impl Tx<'_> {
    fn table(&self, rel: RelId) -> Result<&Table, Error> {
        let Some(r) = self.prog.relations.get(rel) else {
            return Err(Error::UnknownRelation(rel.to_string()));
        };
        self.inputs.tables[rel]
            .as_ref()
            .ok_or_else(|| Error::NotInput {
                relation: r.name.clone(),
            })
    }

    fn name(&self, rel: RelId) -> String {
        self.prog.relations[rel].name.clone()
    }

    fn check_arity(&self, rel: RelId, row: &Row) -> Result<(), Error> {
        let expected = self.prog.relations[rel].columns.len();
        if row.len() == expected {
            Ok(())
        } else {
            Err(Error::Arity {
                relation: self.name(rel),
                expected,
                got: row.len(),
            })
        }
    }

    /// Is `row` present (after the updates so far)?
    fn contains(&self, rel: RelId, row: &Row) -> bool {
        match self.ov.net[rel].get(row) {
            Some(d) if *d > 0 => true,
            Some(d) if *d < 0 => false,
            _ => self.held(rel, row),
        }
    }

    /// Was `row` present before this transaction? (A keyed relation's row is its key's row;
    /// a row whose key cannot be computed was never inserted.)
    fn held(&self, rel: RelId, row: &Row) -> bool {
        match self.inputs.tables[rel].as_ref() {
            Some(Table::Rows(rows)) => rows.contains(row),
            Some(Table::Index(index)) => self.prog.relations[rel]
                .primary_key
                .as_ref()
                .and_then(|pk| eval_ro(self.prog, &pk.expr, row).ok())
                .is_some_and(|key| index.get(&key) == Some(row)),
            None => false,
        }
    }

    fn key_of(&self, rel: RelId, row: &Row) -> Result<Option<Value>, Error> {
        let Some(pk) = &self.prog.relations[rel].primary_key else {
            return Ok(None);
        };
        match eval_ro(self.prog, &pk.expr, row) {
            Ok(k) => Ok(Some(k)),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                Err(Error::Script(format!(
                    "cannot compute the primary key of {}: {e}",
                    format_record(self.prog, rel, row)
                )))
            }
        }
    }

    fn by_key(&self, rel: RelId, key: &Value) -> Option<Row> {
        if let Some(r) = self.ov.keys[rel].get(key) {
            return r.clone();
        }
        match self.inputs.tables[rel].as_ref() {
            Some(Table::Index(index)) => index.get(key).cloned(),
            _ => None,
        }
    }

    fn key_text(&self, rel: RelId, key: &Value) -> String {
        match &self.prog.relations[rel].primary_key {
            Some(pk) => format_value(self.prog, &pk.ty, key),
            None => format!("{key:?}"),
        }
    }

    fn add(&mut self, rel: RelId, row: Row, key: Option<Value>) {
        if let Some(k) = key {
            self.ov.keys[rel].insert(k, Some(row.clone()));
        }
        *self.ov.net[rel].entry(row).or_insert(0) += 1;
    }

    fn remove(&mut self, rel: RelId, row: Row, key: Option<Value>) {
        if let Some(k) = key {
            self.ov.keys[rel].insert(k, None);
        }
        *self.ov.net[rel].entry(row).or_insert(0) -= 1;
    }

    fn require_key(&self, rel: RelId) -> Result<(), Error> {
        if self.prog.relations[rel].primary_key.is_some() {
            Ok(())
        } else {
            Err(Error::NoPrimaryKey {
                relation: self.name(rel),
            })
        }
    }

    fn existing(&self, rel: RelId, key: &Value) -> Result<Row, Error> {
        self.by_key(rel, key).ok_or_else(|| Error::UnknownKey {
            relation: self.name(rel),
            key: self.key_text(rel, key),
        })
    }

    fn insert(&mut self, rel: RelId, row: &Row, replace: bool) -> Result<(), Error> {
        self.check_arity(rel, row)?;
        match self.key_of(rel, row)? {
            None => {
                if !self.contains(rel, row) {
                    self.add(rel, row.clone(), None);
                }
            }
            Some(key) => match self.by_key(rel, &key) {
                Some(old) if old == *row => {}
                Some(old) if replace => {
                    self.remove(rel, old, None);
                    self.add(rel, row.clone(), Some(key));
                }
                Some(old) => {
                    return Err(Error::DuplicateKey {
                        relation: self.name(rel),
                        key: self.key_text(rel, &key),
                        existing: format_record(self.prog, rel, &old),
                    })
                }
                None => self.add(rel, row.clone(), Some(key)),
            },
        }
        Ok(())
    }

    fn update(&mut self, u: &Update) -> Result<(), Error> {
        match u {
            Update::Insert(rel, row) => {
                self.table(*rel)?;
                self.insert(*rel, row, false)
            }
            Update::InsertOrUpdate(rel, row) => {
                self.table(*rel)?;
                self.insert(*rel, row, true)
            }
            Update::Delete(rel, row) => {
                self.table(*rel)?;
                self.check_arity(*rel, row)?;
                if self.contains(*rel, row) {
                    let key = self.key_of(*rel, row)?;
                    self.remove(*rel, row.clone(), key);
                }
                Ok(())
            }
            Update::DeleteKey(rel, key) => {
                self.table(*rel)?;
                self.require_key(*rel)?;
                let old = self.existing(*rel, key)?;
                self.remove(*rel, old, Some(key.clone()));
                Ok(())
            }
            Update::Modify(rel, key, changes) => {
                self.table(*rel)?;
                self.require_key(*rel)?;
                let old = self.existing(*rel, key)?;
                let mut new = old.clone();
                for (col, v) in changes {
                    match new.get_mut(*col) {
                        Some(slot) => *slot = v.clone(),
                        None => {
                            return Err(Error::Arity {
                                relation: self.name(*rel),
                                expected: old.len(),
                                got: col + 1,
                            })
                        }
                    }
                }
                if new != old {
                    self.remove(*rel, old, Some(key.clone()));
                    self.insert(*rel, &new, false)?;
                }
                Ok(())
            }
            Update::Clear(rel) => {
                let table = self.table(*rel)?;
                // Present: the rows held and not deleted by this transaction (no key to
                // compute: a held row is its key's), and those it added (not held).
                let net = &self.ov.net[*rel];
                let mut present: Vec<Row> = table
                    .iter()
                    .filter(|r| !matches!(net.get(*r), Some(d) if *d < 0))
                    .cloned()
                    .collect();
                present.extend(
                    net.iter()
                        .filter(|(row, d)| **d > 0 && !self.held(*rel, row))
                        .map(|(row, _)| row.clone()),
                );
                for row in present {
                    let key = self.key_of(*rel, &row)?;
                    self.remove(*rel, row, key);
                }
                Ok(())
            }
        }
    }
}
