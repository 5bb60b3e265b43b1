//! Personalized PageRank on an undirected weighted graph: a walker at a node moves to a
//! neighbour with probability proportional to the edge's weight, and jumps back to the
//! personalisation vector with probability `restart_prob` (power iteration, or forward push
//! on large graphs).

use crate::config::{PprMethod, RetrieveSettings};
use crate::kb::graph::Csr;

#[derive(Debug, Clone, Copy)]
pub struct PprParams {
    /// Probability of jumping back to the personalisation vector at each step.
    pub restart_prob: f64,
    pub tolerance: f64,
    pub max_iterations: usize,
}

/// Degree-normalised personalisation over `seed_rows` (rows of `csr`); sums to 1.
pub fn personalization(csr: &Csr, seed_rows: &[usize]) -> Vec<f64> {
    let mut p = vec![0.0; csr.len()];
    for &row in seed_rows {
        p[row] += 1.0 / csr.degree(row).max(1) as f64;
    }
    let total: f64 = p.iter().sum();
    if total > 0.0 {
        p.iter_mut().for_each(|x| *x /= total);
    }
    p
}

/// The method `settings` asks for on a graph of this size: `auto` is exact power iteration
/// where it is cheap, and forward push where the whole-graph sweeps would dominate latency.
pub fn method_for(csr: &Csr, settings: &RetrieveSettings) -> PprMethod {
    match settings.ppr_method {
        PprMethod::Auto if csr.targets.len() / 2 <= settings.ppr_auto_max_edges => PprMethod::Power,
        PprMethod::Auto => PprMethod::Push,
        chosen => chosen,
    }
}

/// PPR scores for the sparse personalisation `p` (rows ascending, distinct) by the method
/// `settings` selects (see [`method_for`]): the rows with positive mass, in no set order
/// (callers rank them). Forward
/// push, the method of large graphs, works on the rows it touches only.
pub fn scores(csr: &Csr, p: &[(usize, f64)], settings: &RetrieveSettings) -> Vec<(usize, f64)> {
    match method_for(csr, settings) {
        PprMethod::Push => forward_push_sparse(csr, p, settings.restart_prob, settings.ppr_push_epsilon),
        PprMethod::Power | PprMethod::Auto => {
            let params = PprParams {
                restart_prob: settings.restart_prob,
                tolerance: settings.ppr_tolerance,
                max_iterations: settings.ppr_max_iterations,
            };
            let mut dense = vec![0.0; csr.len()];
            for &(row, mass) in p {
                dense[row] += mass;
            }
            let (scores, _) = power_iteration(csr, &dense, params);
            scores.into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect()
        }
    }
}

/// Adjacency entries above which one power-iteration sweep is split across threads; below
/// it, spawning costs more than the sweep.
const PARALLEL_SWEEP_ENTRIES: usize = 256 * 1024;

/// Power iteration: r <- a p + (1 - a) (W^T r + dangling mass p), W row-normalised by each
/// node's strength (weighted degree), until the L1 change is below `tolerance`. Returns
/// scores summing to the mass of `p` and the iterations used.
///
/// Each sweep first spreads every node's mass over its strength (one sequential pass), so
/// the pull over the adjacency reads one value and one weight per edge; large graphs split the pull into
/// row ranges of equal edge count, one per core.
pub fn power_iteration(csr: &Csr, p: &[f64], params: PprParams) -> (Vec<f64>, usize) {
    let threads = if csr.targets.len() < PARALLEL_SWEEP_ENTRIES {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |t| t.get())
    };
    power_iteration_on(csr, p, params, threads)
}

fn power_iteration_on(csr: &Csr, p: &[f64], params: PprParams, threads: usize) -> (Vec<f64>, usize) {
    let n = csr.len();
    if n == 0 {
        return (Vec::new(), 0);
    }
    let alpha = params.restart_prob;
    let inv_deg: Vec<f64> = (0..n)
        .map(|i| match csr.strength(i) {
            s if s > 0.0 => 1.0 / s,
            _ => 0.0,
        })
        .collect();
    let dangling_rows: Vec<usize> = (0..n).filter(|&i| inv_deg[i] == 0.0).collect();
    let ranges = row_ranges(csr, threads);
    let mut r = p.to_vec();
    let mut spread = vec![0.0; n];
    let mut next = vec![0.0; n];
    let mut iterations = 0;
    while iterations < params.max_iterations {
        iterations += 1;
        spread.iter_mut().zip(&r).zip(&inv_deg).for_each(|((s, x), d)| *s = x * d);
        let dangling: f64 = dangling_rows.iter().map(|&i| r[i]).sum();
        let sweep = Sweep { csr, p, spread: &spread, alpha, dangling };
        let delta: f64 = if ranges.len() == 1 {
            sweep.rows(0, &mut next, &r)
        } else {
            std::thread::scope(|scope| {
                let mut rest_next = next.as_mut_slice();
                let mut rest_r = r.as_slice();
                let mut workers = Vec::with_capacity(ranges.len());
                for range in &ranges {
                    let (mine, tail) = rest_next.split_at_mut(range.len());
                    let (old, tail_r) = rest_r.split_at(range.len());
                    (rest_next, rest_r) = (tail, tail_r);
                    let sweep = &sweep;
                    let first = range.start;
                    workers.push(scope.spawn(move || sweep.rows(first, mine, old)));
                }
                workers.into_iter().map(|w| w.join().unwrap_or(f64::INFINITY)).sum()
            })
        };
        std::mem::swap(&mut r, &mut next);
        if delta < params.tolerance {
            break;
        }
    }
    (r, iterations)
}

/// One pull sweep over a block of rows.
struct Sweep<'a> {
    csr: &'a Csr,
    p: &'a [f64],
    spread: &'a [f64],
    alpha: f64,
    dangling: f64,
}

impl Sweep<'_> {
    /// Fills `next` for rows `first..first + next.len()` and returns the L1 change against
    /// `old` (the same rows of the previous iterate).
    fn rows(&self, first: usize, next: &mut [f64], old: &[f64]) -> f64 {
        let mut delta = 0.0;
        for (offset, (slot, previous)) in next.iter_mut().zip(old).enumerate() {
            let i = first + offset;
            // Pull form: the graph is undirected, so in-neighbours are the CSR row itself.
            let inflow: f64 = self
                .csr
                .neighbours(i)
                .iter()
                .zip(self.csr.neighbour_weights(i))
                .map(|(&j, &w)| w as f64 * self.spread[j as usize])
                .sum();
            *slot = self.alpha * self.p[i] + (1.0 - self.alpha) * (inflow + self.dangling * self.p[i]);
            delta += (*slot - previous).abs();
        }
        delta
    }
}

/// `threads` contiguous row ranges of about equal adjacency size.
fn row_ranges(csr: &Csr, threads: usize) -> Vec<std::ops::Range<usize>> {
    let n = csr.len();
    let entries = csr.targets.len();
    let threads = threads.max(1);
    let mut ranges = Vec::with_capacity(threads);
    let mut start = 0;
    for t in 1..=threads {
        let end = if t == threads {
            n
        } else {
            // First row whose prefix of entries reaches t/threads of the total.
            let goal = entries * t / threads;
            csr.offsets.partition_point(|&o| o < goal).clamp(start, n)
        };
        ranges.push(start..end);
        start = end;
    }
    ranges.retain(|r| !r.is_empty());
    if ranges.is_empty() {
        ranges.push(0..n);
    }
    ranges
}

/// Forward push (Andersen, Chung, Lang 2006): touches only the neighbourhood where the
/// residual is large, so its cost does not grow with the graph. Approximates the same
/// vector as [`power_iteration`] with per-node error below `epsilon * deg`. Dense in and out;
/// see [`forward_push_sparse`].
pub fn forward_push(csr: &Csr, p: &[f64], restart_prob: f64, epsilon: f64) -> Vec<f64> {
    let seeds: Vec<(usize, f64)> = p.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(i, x)| (i, *x)).collect();
    let mut dense = vec![0.0; csr.len()];
    for (row, mass) in forward_push_sparse(csr, &seeds, restart_prob, epsilon) {
        dense[row] = mass;
    }
    dense
}

/// [`forward_push`] from a sparse personalisation (rows ascending, distinct), returning the
/// rows with positive mass in the order the push first reached them. Its time and the memory it clears follow the rows it
/// touches: its arrays come from a pool and only touched entries are reset, so a query on a
/// graph of millions of rows neither allocates nor clears millions of entries.
pub fn forward_push_sparse(csr: &Csr, p: &[(usize, f64)], restart_prob: f64, epsilon: f64) -> Vec<(usize, f64)> {
    static POOL: std::sync::Mutex<Vec<PushScratch>> = std::sync::Mutex::new(Vec::new());
    let pooled = POOL.lock().ok().and_then(|mut pool| pool.pop());
    let mut scratch = pooled.unwrap_or_default();
    let ranked = scratch.run(csr, p, restart_prob, epsilon);
    if let Ok(mut pool) = POOL.lock() {
        pool.push(scratch);
    }
    ranked
}

/// The per-row state of one push, all zero between pushes. Separate arrays: an update of a
/// neighbour reads its residual and flags only, which keeps the hot arrays small (the
/// flags say whether the row is queued, and whether this push reached it already, in the
/// byte a queued flag alone would take).
#[derive(Default)]
struct PushScratch {
    residual: Vec<f64>,
    estimate: Vec<f64>,
    flags: Vec<u8>,
    /// The rows the current push reached, each once.
    rows: Vec<usize>,
}

const QUEUED: u8 = 1;
const REACHED: u8 = 2;

/// How many neighbours ahead of the one a push adds to it asks the memory for: far enough
/// that a fetch from memory is under way by the time its row is reached.
const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring `values[at]` into its caches, if it is in `values`. A hint only:
/// what is computed does not change.
#[inline]
fn prefetch<T>(values: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(value) = values.get(at) {
        // SAFETY: a prefetch reads nothing the program sees and cannot fault, and SSE, the
        // feature it needs, is part of every x86-64 processor.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((value as *const T).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (values, at);
}

impl PushScratch {
    /// Adds `mass` to the residual of `row`, queueing it once it reaches `threshold`, which
    /// is never below `floor`.
    fn add(
        &mut self,
        row: usize,
        mass: f64,
        (floor, threshold): (f64, impl FnOnce() -> f64),
        queue: &mut std::collections::VecDeque<usize>,
    ) {
        let mut flags = self.flags[row];
        if flags & REACHED == 0 {
            flags |= REACHED;
            self.rows.push(row);
        }
        self.residual[row] += mass;
        // Most of a push's additions leave a residual below any threshold: the threshold, a
        // read of the row's degree and a cache miss in a large graph, is asked only above.
        let residual = self.residual[row];
        if flags & QUEUED == 0 && residual >= floor && residual >= threshold() {
            flags |= QUEUED;
            queue.push_back(row);
        }
        self.flags[row] = flags;
    }

    fn run(&mut self, csr: &Csr, p: &[(usize, f64)], restart_prob: f64, epsilon: f64) -> Vec<(usize, f64)> {
        let n = csr.len();
        if self.residual.len() < n {
            self.residual.resize(n, 0.0);
            self.estimate.resize(n, 0.0);
            self.flags.resize(n, 0);
        }
        let threshold = |u: usize| epsilon * csr.degree(u).max(1) as f64;
        let mut queue = std::collections::VecDeque::new();
        for &(row, mass) in p.iter().filter(|(row, mass)| *mass > 0.0 && *row < n) {
            // Every seed is pushed once, whatever its mass.
            self.add(row, mass, (0.0, || 0.0), &mut queue);
        }
        while let Some(u) = queue.pop_front() {
            self.flags[u] &= !QUEUED;
            let ru = self.residual[u];
            if ru < threshold(u) {
                continue;
            }
            self.estimate[u] += restart_prob * ru;
            self.residual[u] = 0.0;
            let strength = csr.strength(u);
            if strength <= 0.0 {
                // Dangling: the walk restarts, returning the mass to the seeds.
                for &(i, pi) in p.iter().filter(|(_, pi)| *pi > 0.0) {
                    self.add(i, (1.0 - restart_prob) * ru * pi, (epsilon, || threshold(i)), &mut queue);
                }
                continue;
            }
            let share = (1.0 - restart_prob) * ru / strength;
            let neighbours = csr.neighbours(u);
            for (at, (&v, &w)) in neighbours.iter().zip(csr.neighbour_weights(u)).enumerate() {
                // The residuals and flags of a large graph's rows miss the caches: the ones
                // a few neighbours ahead are fetched while this one is added to.
                if let Some(&ahead) = neighbours.get(at + PREFETCH_AHEAD) {
                    prefetch(&self.residual, ahead as usize);
                    prefetch(&self.flags, ahead as usize);
                }
                let v = v as usize;
                self.add(v, share * w as f64, (epsilon, || threshold(v)), &mut queue);
            }
        }
        let ranked: Vec<(usize, f64)> =
            self.rows.iter().map(|&row| (row, self.estimate[row])).filter(|(_, mass)| *mass > 0.0).collect();
        for &row in &self.rows {
            (self.residual[row], self.estimate[row], self.flags[row]) = (0.0, 0.0, 0);
        }
        self.rows.clear();
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense reference: solve r = a p + (1 - a) M r by many Jacobi sweeps on the dense
    /// column-stochastic matrix (dangling columns point back to p).
    fn dense_reference(n: usize, edges: &[(u32, u32)], p: &[f64], a: f64) -> Vec<f64> {
        let weighted: Vec<(u32, u32, f32)> = edges.iter().map(|&(x, y)| (x, y, 1.0)).collect();
        dense_weighted_reference(n, &weighted, p, a)
    }

    fn dense_weighted_reference(n: usize, edges: &[(u32, u32, f32)], p: &[f64], a: f64) -> Vec<f64> {
        let mut adj = vec![vec![0.0; n]; n];
        for &(x, y, w) in edges {
            adj[x as usize][y as usize] += w as f64;
            adj[y as usize][x as usize] += w as f64;
        }
        let mut m = vec![vec![0.0; n]; n];
        for j in 0..n {
            let deg: f64 = adj[j].iter().sum();
            for i in 0..n {
                m[i][j] = if deg > 0.0 { adj[j][i] / deg } else { p[i] };
            }
        }
        let mut r = p.to_vec();
        for _ in 0..2000 {
            r = (0..n).map(|i| a * p[i] + (1.0 - a) * (0..n).map(|j| m[i][j] * r[j]).sum::<f64>()).collect();
        }
        r
    }

    fn graph() -> (usize, Vec<(u32, u32)>) {
        // A star around 0, a path 1-5-6, a triangle 2-3-4, and an isolated node 7.
        (8, vec![(0, 1), (0, 2), (0, 3), (0, 4), (2, 3), (3, 4), (4, 2), (1, 5), (5, 6)])
    }

    #[test]
    fn matches_dense_reference_and_sums_to_one() {
        let (n, edges) = graph();
        let csr = Csr::from_edges(n, &edges);
        let p = personalization(&csr, &[6, 0, 7]);
        let params = PprParams { restart_prob: 0.5, tolerance: 1e-12, max_iterations: 500 };
        let (r, _) = power_iteration(&csr, &p, params);
        let reference = dense_reference(n, &edges, &p, 0.5);
        for (a, b) in r.iter().zip(&reference) {
            assert!((a - b).abs() < 1e-9, "{r:?} vs {reference:?}");
        }
        assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let push = forward_push(&csr, &p, 0.5, 1e-10);
        for (a, b) in push.iter().zip(&reference) {
            assert!((a - b).abs() < 1e-6, "push {push:?} vs {reference:?}");
        }
    }

    #[test]
    fn weighted_edges_match_dense_reference() {
        // A heavy edge 0-1 and light ones 0-2, 2-3: the walker from 0 mostly goes to 1.
        let edges = [(0, 1, 4.0), (0, 2, 0.5), (2, 3, 1.0), (1, 3, 0.25)];
        let csr = Csr::from_weighted_edges(5, &edges);
        let p = [0.7, 0.0, 0.0, 0.1, 0.2];
        let (r, _) = power_iteration(&csr, &p, PprParams { restart_prob: 0.3, tolerance: 1e-13, max_iterations: 1000 });
        let reference = dense_weighted_reference(5, &edges, &p, 0.3);
        for (a, b) in r.iter().zip(&reference) {
            assert!((a - b).abs() < 1e-9, "{r:?} vs {reference:?}");
        }
        assert!(r[1] > r[2], "the heavy neighbour gets more mass");
        let push = forward_push(&csr, &p, 0.3, 1e-11);
        for (a, b) in push.iter().zip(&reference) {
            assert!((a - b).abs() < 1e-6, "push {push:?} vs {reference:?}");
        }
    }

    #[test]
    fn a_sparse_push_equals_the_dense_one_and_leaves_no_trace_for_the_next() {
        let (n, edges) = graph();
        let csr = Csr::from_edges(n, &edges);
        let p = personalization(&csr, &[6, 0, 7]);
        let dense = forward_push(&csr, &p, 0.5, 1e-9);
        let seeds: Vec<(usize, f64)> = p.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(i, x)| (i, *x)).collect();
        let mut scratch = PushScratch::default();
        let mut sparse = scratch.run(&csr, &seeds, 0.5, 1e-9);
        sparse.sort_unstable_by_key(|(row, _)| *row);
        let expected: Vec<(usize, f64)> =
            dense.iter().enumerate().filter(|(_, x)| **x > 0.0).map(|(i, x)| (i, *x)).collect();
        assert_eq!(sparse, expected, "the same pushes in the same order");
        assert!(scratch.rows.is_empty());
        assert!(scratch.residual.iter().chain(&scratch.estimate).all(|x| *x == 0.0));
        assert!(scratch.flags.iter().all(|f| *f == 0));
        let again = scratch.run(&csr, &[(3, 1.0)], 0.5, 1e-9);
        let fresh = PushScratch::default().run(&csr, &[(3, 1.0)], 0.5, 1e-9);
        assert_eq!(again, fresh, "a reused scratch answers as a fresh one");
    }

    #[test]
    fn split_sweeps_equal_one_sweep() {
        // A skewed random graph: low rows are hubs, so equal-edge ranges differ in rows.
        let n = 3000u32;
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let edges: Vec<(u32, u32)> = (0..20_000).map(|_| ((next() % n).min(next() % n), next() % n)).collect();
        let csr = Csr::from_edges(n as usize + 5, &edges);
        let p = personalization(&csr, &[1, 700, 2999]);
        let params = PprParams { restart_prob: 0.5, tolerance: 1e-10, max_iterations: 200 };
        let (one, k1) = power_iteration_on(&csr, &p, params, 1);
        for threads in [2, 3, 7] {
            let ranges = row_ranges(&csr, threads);
            assert_eq!(ranges.iter().map(|r| r.len()).sum::<usize>(), csr.len(), "ranges cover every row once");
            let (split, k) = power_iteration_on(&csr, &p, params, threads);
            assert_eq!(k, k1);
            for (a, b) in one.iter().zip(&split) {
                assert!((a - b).abs() < 1e-12);
            }
        }
        assert!((one.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn low_degree_seed_outweighs_hub_seed() {
        let (n, edges) = graph();
        let csr = Csr::from_edges(n, &edges);
        let p = personalization(&csr, &[0, 6]);
        assert!(p[6] > p[0], "1/deg: the leaf seed gets more restart mass");
        let (r, _) = power_iteration(&csr, &p, PprParams { restart_prob: 0.5, tolerance: 1e-10, max_iterations: 200 });
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|a, b| r[*b].total_cmp(&r[*a]));
        assert!(order[..3].contains(&6) && order[..3].contains(&0), "{order:?}");
        assert_eq!(r[7], 0.0, "unreachable node gets nothing");
    }
}
