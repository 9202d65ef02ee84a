//! What a sweep shows while it runs and when it ends: a progress line on a terminal (seeds
//! done, violations, seeds per second, time left), quiet when standard error is not a terminal
//! or `CI` is set; and a table with one row per scenario at the end.

use std::fmt::Write;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the progress line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(250);

pub struct Progress {
    total: usize,
    done: AtomicUsize,
    violating: AtomicUsize,
    started: Instant,
    /// When the line was last drawn; `None` inside means never.
    drawn: Mutex<Option<Instant>>,
    enabled: bool,
}

/// Whether to draw: only for a person at a terminal, never in CI logs.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
}

impl Progress {
    pub fn new(total: usize, enabled: bool) -> Progress {
        Progress {
            total,
            done: AtomicUsize::new(0),
            violating: AtomicUsize::new(0),
            started: Instant::now(),
            drawn: Mutex::new(None),
            enabled,
        }
    }

    /// One seed finished.
    pub fn tick(&self, violated: bool) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        let violating = self.violating.load(Ordering::SeqCst) + usize::from(violated);
        if violated {
            self.violating.fetch_add(1, Ordering::SeqCst);
        }
        if !self.enabled {
            return;
        }
        let mut drawn = self.drawn.lock().unwrap();
        if drawn.is_some_and(|t| t.elapsed() < REDRAW) && done < self.total {
            return;
        }
        *drawn = Some(Instant::now());
        eprint!(
            "\r\x1b[K{}",
            line(done, self.total, violating, self.started.elapsed())
        );
    }

    /// Clears the line, so that a message printed next starts at the margin.
    pub fn clear(&self) {
        if self.enabled {
            eprint!("\r\x1b[K");
        }
    }
}

/// `120/400 seeds, 3 violating, 4.1 seeds/s, 68 s left`.
pub fn line(done: usize, total: usize, violating: usize, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let rate = done as f64 / secs;
    let left = if rate > 0.0 {
        format!("{:.0} s left", (total.saturating_sub(done)) as f64 / rate)
    } else {
        "time left unknown".to_string()
    };
    format!("{done}/{total} seeds, {violating} violating, {rate:.1} seeds/s, {left}")
}

/// One scenario's row in the end-of-sweep table. `x cpu` is its speed: simulated seconds per
/// CPU second of its runs, the figure to compare across days (`x real`, per wall second of the
/// runs, also counts the time the machine gave to others).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub scenario: String,
    pub seeds: usize,
    pub violating: usize,
    pub first_violating: Option<u64>,
    pub simulated_secs: f64,
    pub wall_secs: f64,
    /// The runs' CPU time, when every run measured it.
    pub cpu_secs: Option<f64>,
    pub verdict: String,
}

pub fn table(rows: &[Row]) -> String {
    let width = rows
        .iter()
        .map(|r| r.scenario.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<width$}  {:>6}  {:>9}  {:>10}  {:>8}  {:>7}  {:>6}  {:>7}  {:>6}  verdict",
        "scenario",
        "seeds",
        "violating",
        "first seed",
        "sim s",
        "wall s",
        "x real",
        "cpu s",
        "x cpu"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<width$}  {:>6}  {:>9}  {:>10}  {:>8.0}  {:>7.1}  {:>6.0}  {:>7}  {:>6}  {}",
            r.scenario,
            r.seeds,
            r.violating,
            r.first_violating
                .map_or("-".to_string(), |seed| seed.to_string()),
            r.simulated_secs,
            r.wall_secs,
            r.simulated_secs / r.wall_secs.max(1e-9),
            r.cpu_secs.map_or("-".to_string(), |c| format!("{c:.1}")),
            r.cpu_secs.map_or("-".to_string(), |c| format!(
                "{:.0}",
                r.simulated_secs / c.max(1e-9)
            )),
            r.verdict
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_has_counts_rate_and_time_left() {
        let l = line(100, 400, 3, Duration::from_secs(25));
        assert_eq!(l, "100/400 seeds, 3 violating, 4.0 seeds/s, 75 s left");
    }

    #[test]
    fn a_disabled_progress_counts_silently() {
        let p = Progress::new(2, false);
        p.tick(true);
        p.tick(false);
        assert_eq!(p.done.load(Ordering::SeqCst), 2);
        assert_eq!(p.violating.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_table_has_a_row_per_scenario() {
        let rows = vec![
            Row {
                scenario: "power-loss-fsync".into(),
                seeds: 20,
                violating: 0,
                first_violating: None,
                simulated_secs: 400.0,
                wall_secs: 4.0,
                cpu_secs: Some(2.0),
                verdict: "ok".into(),
            },
            Row {
                scenario: "planted-ack-before-fsync".into(),
                seeds: 20,
                violating: 19,
                first_violating: Some(1),
                simulated_secs: 400.0,
                wall_secs: 5.0,
                cpu_secs: None,
                verdict: "ok (unsafe configuration caught in 19 seeds)".into(),
            },
        ];
        let t = table(&rows);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().nth(2).unwrap().contains("      1  "), "{t}");
        assert!(t.starts_with("scenario "));
        // 400 simulated s in 2 CPU s; the second row measured no CPU time.
        assert!(
            t.lines().nth(1).unwrap().contains("    2.0     200  ok"),
            "{t}"
        );
        assert!(
            t.lines().nth(2).unwrap().contains("        -       -  ok"),
            "{t}"
        );
    }
}
