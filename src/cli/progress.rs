//! The progress line of every command that waits (`weir reassign --wait`, `weir bench`,
//! `weir cluster up`): one bar and a message, redrawn on standard error at most
//! [`REDRAWS_PER_SECOND`] times a second, and only when standard error is a terminal, so
//! scripts and CI logs see nothing of it (what a command reports for them goes to standard
//! output, or to one closing line of its own). Drawn by `indicatif`.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar's width in characters.
const WIDTH: usize = 30;
/// The rate limit of redraws (a 100 ms tick is smooth enough, and costs the terminal nothing).
pub const REDRAWS_PER_SECOND: u8 = 10;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A progress line on standard error when it is a terminal; otherwise one that draws
    /// nothing.
    pub fn on_stderr() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND)
        } else {
            ProgressDrawTarget::hidden()
        };
        Self::to(target)
    }

    /// A progress line drawn to `target` (a terminal-like sink in tests).
    fn to(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        // The bar is drawn into the message, so one update redraws both together (two
        // updates, position then message, would each take a turn of the rate limit).
        bar.set_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
        Self { bar }
    }

    /// Whether anything is drawn (standard error is a terminal).
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Shows `done` (a fraction, clamped to 0..=1) and `message`.
    pub fn update(&self, done: f64, message: String) {
        let done = if done.is_finite() {
            done.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.bar.set_message(render(done, &message));
    }

    /// Erases the line, so what the command prints next starts on a clean one.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    /// An error that ends the command early leaves no half-drawn line behind.
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

/// `[#####>    ] message`, the bar filled to `done` (0..=1).
fn render(done: f64, message: &str) -> String {
    let filled = ((done * WIDTH as f64).floor() as usize).min(WIDTH);
    let head = if filled < WIDTH { ">" } else { "" };
    let rest = WIDTH - filled - head.len();
    format!(
        "[{}{head}{}] {message}",
        "#".repeat(filled),
        " ".repeat(rest)
    )
}

/// The fraction `part / whole` (0 for an empty whole).
pub fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::TermLike;

    use super::*;

    /// A terminal that keeps the text of its current line (what a user sees).
    #[derive(Debug, Default, Clone)]
    struct FakeTerminal {
        line: Arc<Mutex<String>>,
        writes: Arc<Mutex<usize>>,
    }

    impl TermLike for FakeTerminal {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.line.lock().unwrap().push_str(s);
            *self.writes.lock().unwrap() += 1;
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.line.lock().unwrap().clear();
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn on_fake_terminal() -> (Progress, FakeTerminal) {
        let terminal = FakeTerminal::default();
        let target =
            ProgressDrawTarget::term_like_with_hz(Box::new(terminal.clone()), REDRAWS_PER_SECOND);
        (Progress::to(target), terminal)
    }

    #[test]
    fn draws_the_bar_and_message_on_a_terminal() {
        let (progress, terminal) = on_fake_terminal();
        assert!(!progress.is_hidden());
        progress.update(fraction(1, 2), "1/2 partitions moved, 0.5s".into());
        assert_eq!(
            terminal.line.lock().unwrap().trim_end(),
            format!(
                "[{}>{}] 1/2 partitions moved, 0.5s",
                "#".repeat(15),
                " ".repeat(14)
            )
        );
        progress.finish();
        assert_eq!(terminal.line.lock().unwrap().as_str(), "");
    }

    #[test]
    fn redraws_are_rate_limited() {
        let (progress, terminal) = on_fake_terminal();
        for i in 0..=1000u64 {
            progress.update(fraction(i, 1000), format!("{i} records"));
        }
        let writes = *terminal.writes.lock().unwrap();
        assert!(writes < 100, "{writes} redraws for 1001 updates");
    }

    #[test]
    fn hidden_when_standard_error_is_not_a_terminal() {
        // Under `cargo test` standard error is captured or piped, not a terminal, as in a
        // script or CI log; the test says so instead of assuming it.
        let progress = Progress::on_stderr();
        assert_eq!(progress.is_hidden(), !std::io::stderr().is_terminal());
        let hidden = Progress::to(ProgressDrawTarget::hidden());
        assert!(hidden.is_hidden());
        hidden.update(0.5, "nothing drawn".into());
        hidden.finish();
    }

    #[test]
    fn fractions_are_clamped() {
        assert_eq!(fraction(3, 0), 0.0);
        let (progress, terminal) = on_fake_terminal();
        progress.update(7.0, "over".into());
        assert!(terminal
            .line
            .lock()
            .unwrap()
            .starts_with(&format!("[{}]", "#".repeat(30))));
    }
}
