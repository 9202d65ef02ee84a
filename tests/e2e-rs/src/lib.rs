//! A Weir broker process for the rdkafka tests: `weir serve --config server.properties` on a
//! free 127.0.0.1 port with a fresh data directory, stopped (SIGTERM, then SIGKILL) and removed
//! on drop.
//!
//! `WEIR_BIN` names the binary (default: the repository's `target/release/weir`).

use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Weir {
    child: Option<Child>,
    dir: PathBuf,
    pub bootstrap: String,
}

/// A port the OS had free a moment ago (bind port 0, read it, close).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn binary() -> PathBuf {
    match std::env::var_os("WEIR_BIN") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/weir"),
    }
}

impl Weir {
    /// Starts a broker whose topics get `partitions` partitions when auto-created.
    pub fn start(partitions: u32) -> Weir {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weir-e2e-rs-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the test dir");
        let port = free_port();
        let mut controller_port = free_port();
        while controller_port == port {
            controller_port = free_port();
        }
        let config = dir.join("server.properties");
        fs::write(
            &config,
            format!(
                "node.id=1\n\
                 process.roles=broker,controller\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 controller.quorum.voters=1@127.0.0.1:{controller_port}\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions={partitions}\n\
                 auto.create.topics.enable=true\n",
                dir.join("data").display()
            ),
        )
        .expect("write server.properties");
        let log = fs::File::create(dir.join("weir.log")).expect("create weir.log");
        let bin = binary();
        let child = Command::new(&bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut weir = Weir {
            child: Some(child),
            dir,
            bootstrap: format!("127.0.0.1:{port}"),
        };
        weir.wait_until_serving();
        weir
    }

    fn wait_until_serving(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            let child = self.child.as_mut().expect("running");
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!("weir exited at start ({status}):\n{}", self.log());
            }
            if TcpStream::connect(&self.bootstrap).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "weir did not listen on {} within {START_TIMEOUT:?}",
            self.bootstrap
        );
    }

    /// The broker's log so far, for failure messages.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = fs::File::open(self.dir.join("weir.log")) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM for a clean shutdown; SIGKILL if it does not exit in time.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
