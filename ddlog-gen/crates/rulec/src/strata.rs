//! Stratification: the relation dependency graph, its strongly connected components
//! (Tarjan), and the check that no negation or aggregation goes through recursion.

use crate::error::CompileError;
use crate::ir::{Relation, Role, Stratum};
use crate::lower::{Dep, DepKind};

/// Strongly connected components of a graph given as adjacency lists, in an order where
/// every component comes after all components it has edges to.
pub fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct St<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(st: &mut St, v: usize) {
        st.index[v] = Some(st.next);
        st.low[v] = st.next;
        st.next += 1;
        st.stack.push(v);
        st.on_stack[v] = true;
        for &w in &st.adj[v] {
            match st.index[w] {
                None => {
                    visit(st, w);
                    st.low[v] = st.low[v].min(st.low[w]);
                }
                Some(iw) if st.on_stack[w] => st.low[v] = st.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(st.low[v]) == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().expect("on stack");
                st.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            comp.sort_unstable();
            st.out.push(comp);
        }
    }
    let n = adj.len();
    let mut st = St {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if st.index[v].is_none() {
            visit(&mut st, v);
        }
    }
    st.out
}

/// Compute the strata. `deps[i]` are the edges of rule `rule_of_dep[i]`; `rule_heads[r]`
/// is the head of rule `r`. Errors if a negative or aggregating edge lies on a cycle.
pub fn stratify(
    rels: &[Relation],
    rule_heads: &[usize],
    deps: &[Dep],
) -> Result<Vec<Stratum>, CompileError> {
    let mut adj = vec![Vec::new(); rels.len()];
    for d in deps {
        if !adj[d.head].contains(&d.body) {
            adj[d.head].push(d.body);
        }
    }
    let comps = tarjan(&adj);
    let mut comp_of = vec![0; rels.len()];
    for (c, comp) in comps.iter().enumerate() {
        for &r in comp {
            comp_of[r] = c;
        }
    }
    // First offending edge in source order.
    for d in deps {
        if d.kind != DepKind::Pos && comp_of[d.head] == comp_of[d.body] {
            let (h, b) = (&rels[d.head].name, &rels[d.body].name);
            let msg = if d.kind == DepKind::Neg {
                format!(
                    "relation `{h}` depends negatively on itself through `{b}`: not stratifiable"
                )
            } else {
                format!("relation `{h}` depends on itself through an aggregation over `{b}`: not stratifiable")
            };
            return Err(d.span.error(msg));
        }
    }
    let mut strata = Vec::new();
    for comp in comps {
        if comp.iter().all(|&r| rels[r].role == Role::Input) {
            continue;
        }
        let recursive = comp.len() > 1 || adj[comp[0]].contains(&comp[0]);
        let rules = (0..rule_heads.len())
            .filter(|&i| comp.contains(&rule_heads[i]))
            .collect();
        strata.push(Stratum {
            relations: comp,
            rules,
            recursive,
        });
    }
    Ok(strata)
}
