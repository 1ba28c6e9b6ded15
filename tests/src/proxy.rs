//! A TCP proxy in front of a Redis that, when armed, lets the next script call (or the next
//! request naming a given key) through to Redis and then drops the connection before the reply
//! reaches the client: the write happened, the client only sees its connection die.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the next request must contain to have its reply swallowed (`None`: disarmed).
type Armed = Arc<Mutex<Option<Vec<u8>>>>;

pub struct DroppingProxy {
    pub port: u16,
    armed: Armed,
    dropped: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl DroppingProxy {
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (armed, dropped): (Armed, _) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
        let (task_armed, task_dropped) = (armed.clone(), dropped.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else { continue };
                tokio::spawn(relay(client, server, task_armed.clone(), task_dropped.clone()));
            }
        });
        Self { port, armed, dropped, accept }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The next `EVALSHA` is forwarded; its reply is swallowed and the connection closed.
    pub fn drop_next_script_reply(&self) {
        self.drop_next_reply_to(b"EVALSHA");
    }

    /// The same for the next request whose bytes contain `needle` (a key's name, a command).
    pub fn drop_next_reply_to(&self, needle: &[u8]) {
        *self.armed.lock().unwrap() = Some(needle.to_vec());
    }

    /// Disarmed: a fault that found no request to hit leaves none behind.
    pub fn disarm(&self) {
        *self.armed.lock().unwrap() = None;
    }

    /// Replies swallowed so far.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for DroppingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, armed: Armed, dropped: Arc<AtomicUsize>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let swallow = AtomicBool::new(false);
    let requests = async {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = client_read.read(&mut buf).await {
            let hit = {
                let mut armed = armed.lock().unwrap();
                let hit = armed.as_deref().is_some_and(|needle| buf[..n].windows(needle.len()).any(|w| w == needle));
                if hit {
                    *armed = None;
                }
                hit
            };
            if hit {
                swallow.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    let replies = async {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = server_read.read(&mut buf).await {
            if swallow.load(Ordering::SeqCst) {
                dropped.fetch_add(1, Ordering::SeqCst);
                break;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    // Whichever side ends first closes both connections (the halves drop here).
    tokio::select! {
        () = requests => {}
        () = replies => {}
    }
}
