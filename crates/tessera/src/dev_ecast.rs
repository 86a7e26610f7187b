//! `tessera dev --protocol sequenced`: a local partitioned cluster of separate processes on
//! 127.0.0.1 — an E-Cast router group and storage processes on a ring — ready for redis-cli on
//! any storage process.

use crate::dev::{install_ctrl_c, stop, DevArguments};
use crate::info;
use anyhow::{bail, Context};
use runtime::ecast::config::{ClusterConfig, ClusterDurability, PartitionMode};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Storage processes when `--nodes` is not given: with the default replication of 3, three
/// processes make every partition a group of all three, so one laptop tolerates the loss of
/// any one process; `sequenced` clusters keep the six their benchmarks were tuned with.
const NODES_DEFAULT: u64 = 3;
const NODES_DEFAULT_SEQUENCED: u64 = 6;

/// Takes the lock of `data_dir`, a file beside it (`<data_dir>.lock`, never cleared with the
/// directory), refusing if another `tessera dev` holds it. The lock is the operating system's
/// (released however the holder exits); the file names the holder's pid for the message.
fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    let name = data_dir
        .file_name()
        .with_context(|| format!("{} names no directory", data_dir.display()))?;
    let mut lock_name = name.to_os_string();
    lock_name.push(".lock");
    let path = data_dir.with_file_name(lock_name);
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            bail!(
                "{} is in use by another `tessera dev`{} (its lock: {}); stop it, or pass another --data-dir",
                data_dir.display(),
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                },
                path.display()
            );
        }
        Err(std::fs::TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

pub fn run(
    arguments: &DevArguments,
    partitions: PartitionMode,
    durability: ClusterDurability,
) -> anyhow::Result<()> {
    let nodes = arguments.nodes.unwrap_or(match partitions {
        PartitionMode::Sequenced => NODES_DEFAULT_SEQUENCED,
        PartitionMode::Vr | PartitionMode::Skyros => NODES_DEFAULT,
    });
    if !(1..=100).contains(&nodes) {
        bail!("--nodes must be between 1 and 100");
    }
    if !(1..=9).contains(&arguments.routers) {
        bail!("--routers must be between 1 and 9");
    }
    let data_dir = arguments
        .data_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-dev"));
    // Held until `tessera dev` exits: a second `tessera dev` on the same directory would clear
    // it (memory) or run a second set of processes on the same logs (disk).
    let _lock = lock_data_dir(&data_dir)?;
    let cluster_file = data_dir.join("cluster.toml");
    let kept = durability == ClusterDurability::Disk && cluster_file.exists();
    if data_dir.exists() && !kept {
        // Memory: nothing is kept on disk, every run starts empty (a disk cluster's directory
        // without its cluster file holds nothing it could start from either).
        std::fs::remove_dir_all(&data_dir)
            .with_context(|| format!("cannot clear {}", data_dir.display()))?;
    }
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let router_port = arguments
        .port
        .checked_add(200)
        .context("port out of range")?;
    let config = ClusterConfig::loopback(
        std::process::id() as u64 ^ 0xeca5_7000,
        arguments.routers,
        nodes,
        arguments.replication,
        arguments.port,
        router_port,
        data_dir.clone(),
    )
    .and_then(|mut config| {
        config.partitions = partitions;
        config.durability = durability;
        config.range_prefixes = arguments.range_prefixes.clone();
        config.skyros_comm = arguments.skyros_comm;
        if arguments.insecure {
            config.security = runtime::security::SecurityConfig::insecure();
        }
        let mut config = config.with_active(arguments.active.unwrap_or(nodes))?;
        if partitions.grouped() && arguments.pg_port != 0 {
            config = config.with_pg_ports(arguments.pg_port)?;
        }
        let metrics_port = arguments
            .metrics_port
            .unwrap_or(u32::from(arguments.port) + 400);
        if metrics_port != 0 {
            let base = u16::try_from(metrics_port)
                .map_err(|_| format!("metrics port {metrics_port} out of range"))?;
            config = config.with_metrics_ports(base)?;
        }
        config.validate()?;
        Ok(config)
    })
    .map_err(anyhow::Error::msg)?;
    let mut config = config;
    let tls = if arguments.tls {
        let files = crate::dev_tls::prepare(&data_dir)?;
        config.security.tls_cert_file = Some(files.certificate.clone());
        config.security.tls_key_file = Some(files.key.clone());
        Some(files)
    } else {
        None
    };
    let config = if kept {
        // A disk cluster starts again from its directory: the same cluster file, if it is
        // the cluster these arguments ask for.
        let existing = ClusterConfig::load(&cluster_file).map_err(anyhow::Error::msg)?;
        let mut asked = config.clone();
        asked.cluster = existing.cluster;
        if asked != existing {
            bail!(
                "{} holds a disk cluster of another shape (nodes, routers, replication, protocol, ports or range prefixes differ); start it with the same arguments, or use another --data-dir",
                data_dir.display()
            );
        }
        eprintln!("Restarting the disk cluster in {}.", data_dir.display());
        existing
    } else {
        std::fs::write(&cluster_file, config.render())?;
        config
    };
    let password = admin_password(&config)?;
    let mut processes = Vec::new();
    for index in 0..arguments.routers {
        let name = format!("router-{index}");
        processes.push((
            name.clone(),
            spawn(
                &cluster_file,
                &data_dir,
                &name,
                "--router",
                &index.to_string(),
            )?,
        ));
    }
    for storage in &config.storage {
        let name = format!("storage-{}", storage.id);
        processes.push((
            name.clone(),
            spawn(
                &cluster_file,
                &data_dir,
                &name,
                "--storage",
                &storage.id.to_string(),
            )?,
        ));
    }
    let access = Access {
        password: password.as_deref(),
        ca: tls.as_ref().map(|files| files.ca.as_path()),
    };
    let outcome = wait_and_report(arguments, &config, &access, &mut processes);
    let mut children: Vec<Child> = processes.into_iter().map(|(_, child)| child).collect();
    stop(&mut children);
    outcome
}

fn spawn(
    cluster_file: &Path,
    data_dir: &Path,
    name: &str,
    role: &str,
    index: &str,
) -> anyhow::Result<Child> {
    let log = std::fs::File::create(data_dir.join(format!("{name}.log")))?;
    let executable = std::env::current_exe().context("cannot find the tessera executable")?;
    Command::new(executable)
        .arg("node")
        .arg("--cluster")
        .arg(cluster_file)
        .arg(role)
        .arg(index)
        .arg("--exit-with-parent")
        .stdin(Stdio::piped())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {name}"))
}

fn clients(config: &ClusterConfig) -> Vec<String> {
    config
        .storage
        .iter()
        .map(|storage| storage.client.to_string())
        .collect()
}

/// The admin's password: kept from an earlier run of a disk cluster, else generated and
/// written (owner-only) where the storage processes read it. `None` with `--insecure`.
fn admin_password(config: &ClusterConfig) -> anyhow::Result<Option<String>> {
    if config.security.insecure {
        eprintln!(
            "WARNING: --insecure: every port of this cluster accepts anyone, without a password."
        );
        return Ok(None);
    }
    write_secret(&config.data_dir.join("cluster-secret"))?;
    let path = config.security.admin_password_path(&config.data_dir);
    if let Ok(text) = std::fs::read_to_string(&path) {
        if let Some(password) = text.lines().next().filter(|line| !line.is_empty()) {
            return Ok(Some(password.to_string()));
        }
    }
    let password = runtime::security::random_token(18);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(file, "{password}")?;
    Ok(Some(password))
}

/// How this process reaches the client ports: the admin's password, the CA of `--tls`.
struct Access<'a> {
    password: Option<&'a str>,
    ca: Option<&'a Path>,
}

impl Access<'_> {
    fn info(&self, config: &ClusterConfig, client: &str) -> Result<info::Fields, String> {
        let credentials = self
            .password
            .map(|password| (config.security.admin_user.as_str(), password));
        info::info_as(client, credentials, self.ca)
    }
}

/// Writes a fresh cluster secret (owner-only) unless one is there: every process of the
/// cluster authenticates its E-Cast frames with it.
fn write_secret(path: &Path) -> anyhow::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(file, "{}", runtime::security::random_token(32))?;
    Ok(())
}

/// Ready when every storage process's gateway has had an answer from the router group.
fn ready(config: &ClusterConfig, access: &Access) -> bool {
    clients(config).iter().all(|client| {
        access.info(config, client).is_ok_and(|fields| {
            fields
                .get("tessera_ecast_router_answers")
                .is_some_and(|answers| answers != "0")
        })
    })
}

fn wait_and_report(
    arguments: &DevArguments,
    config: &ClusterConfig,
    access: &Access,
    processes: &mut [(String, Child)],
) -> anyhow::Result<()> {
    let password = access.password;
    let started = Instant::now();
    while !ready(config, access) {
        check_alive(processes, &config.data_dir)?;
        if started.elapsed() > Duration::from_secs(30) {
            bail!(
                "the cluster was not ready within 30 s; see the logs in {}",
                config.data_dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let standbys = config
        .storage
        .iter()
        .filter(|storage| storage.standby)
        .count();
    let active = if standbys == 0 {
        String::new()
    } else {
        format!(
            "{} active, {standbys} standby; ",
            config.storage.len() - standbys
        )
    };
    let mode = match config.partitions {
        PartitionMode::Sequenced => "sequenced",
        PartitionMode::Vr => "vr partition groups",
        PartitionMode::Skyros => "skyros partition groups",
    };
    println!(
        "Tessera dev cluster ready in {:.1}s: {} storage processes ({active}{mode}, {} replicas per partition), {} routers.",
        started.elapsed().as_secs_f64(),
        config.storage.len(),
        config.replication,
        config.routers.len()
    );
    let user = &config.security.admin_user;
    match password {
        Some(password) => println!(
            "Admin user {user}, password {password} (also in {}).",
            config
                .security
                .admin_password_path(&config.data_dir)
                .display()
        ),
        // On standard error, so that scripts reading the connection lines are unchanged.
        None => {
            eprintln!("WARNING: running --insecure: no user or password is asked for on any port.")
        }
    }
    let mut redis_auth = password.map_or(String::new(), |password| {
        format!(" --user {user} --pass {password} --no-auth-warning")
    });
    let mut psql_tls = String::new();
    if let Some(ca) = access.ca {
        redis_auth = format!(" --tls --cacert {}{redis_auth}", ca.display());
        psql_tls = format!("?sslmode=verify-full&sslrootcert={}", ca.display());
    }
    for storage in &config.storage {
        let psql = match (storage.pg, password) {
            (Some(pg), Some(password)) => format!(
                "    psql 'postgresql://{user}:{password}@{}:{}/tessera{psql_tls}'",
                pg.ip(),
                pg.port()
            ),
            (Some(pg), None) => format!(
                "    psql 'postgresql://{}:{}/tessera{psql_tls}'",
                pg.ip(),
                pg.port()
            ),
            (None, _) => String::new(),
        };
        println!(
            "  storage {}: redis-cli -p {}{redis_auth}{psql}{}",
            storage.id,
            storage.client.port(),
            if storage.standby { " (standby)" } else { "" }
        );
    }
    let routers: Vec<String> = config
        .routers
        .iter()
        .map(|router| router.address.to_string())
        .collect();
    println!("  routers: {}", routers.join(", "));
    let metrics: Vec<String> = config
        .storage
        .iter()
        .filter_map(|storage| storage.metrics)
        .chain(config.routers.iter().filter_map(|router| router.metrics))
        .map(|address| format!("http://{address}/metrics"))
        .collect();
    if !metrics.is_empty() {
        println!("  Prometheus metrics: {}", metrics.join(" "));
    }
    println!(
        "  tessera status --cluster {}",
        config.data_dir.join("cluster.toml").display()
    );
    match config.partitions {
        PartitionMode::Sequenced => println!(
            "Any storage process serves every command through E-Cast; READMODE sequential|snapshot|basic sets a connection's read isolation. No PostgreSQL listener: sequenced storage processes hold no tables (use --protocol vr or skyros for SQL). Logs: {}",
            config.data_dir.display()
        ),
        PartitionMode::Vr => println!(
            "Any storage process serves every command: single-partition ones straight to the partition's VR group (the router bypass), multi-partition ones through E-Cast. Logs: {}",
            config.data_dir.display()
        ),
        PartitionMode::Skyros => println!(
            "Any storage process serves every command: single-partition ones straight to the partition's Skyros group (the router bypass; a SET completes in one round trip to every member unless the nilext gate refuses it), multi-partition ones through E-Cast. Logs: {}",
            config.data_dir.display()
        ),
    }
    if config.partitions == PartitionMode::Sequenced
        || config.elastic_groups()
        || config.regrouped()
    {
        println!(
            "tessera admin --cluster {} status|expand|contract|replace|rebalance|join|leave changes the ring.",
            config.data_dir.join("cluster.toml").display()
        );
    }
    println!("Ctrl-C stops the cluster.");
    if arguments.no_wait {
        return Ok(());
    }
    let stop_requested = install_ctrl_c()?;
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Once the cluster runs, a process that dies is an event of the cluster's life (a test or a
    // benchmark killed it; the others carry on), not the end of `tessera dev`.
    let mut exited = vec![false; processes.len()];
    while !stop_requested.load(std::sync::atomic::Ordering::SeqCst) {
        for ((name, child), exited) in processes.iter_mut().zip(exited.iter_mut()) {
            if *exited {
                continue;
            }
            if let Some(status) = child.try_wait()? {
                *exited = true;
                println!(
                    "\n{name} exited ({status}); the others carry on. Its log: {}",
                    config.data_dir.join(format!("{name}.log")).display()
                );
            }
        }
        if exited.iter().all(|exited| *exited) {
            bail!("every process of the cluster exited");
        }
        if interactive {
            print!("\r{}\x1b[K", status_line(config, access));
        }
        std::io::stdout().flush()?;
        for _ in 0..10 {
            if stop_requested.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    println!("\nstopping");
    Ok(())
}

/// One line: per storage process, the last timestamp it delivered and its configuration
/// version.
fn status_line(config: &ClusterConfig, access: &Access) -> String {
    let mut parts = Vec::new();
    for (storage, client) in config.storage.iter().zip(clients(config)) {
        match access.info(config, &client) {
            Ok(fields) => {
                let field =
                    |name: &str| fields.get(name).cloned().unwrap_or_else(|| "?".to_string());
                parts.push(format!(
                    "s{} t{} v{}",
                    storage.id,
                    field("tessera_ecast_delivered"),
                    field("tessera_ecast_version")
                ));
            }
            Err(_) => parts.push(format!("s{} down", storage.id)),
        }
    }
    parts.join(" | ")
}

fn check_alive(processes: &mut [(String, Child)], data_dir: &Path) -> anyhow::Result<()> {
    for (name, child) in processes.iter_mut() {
        if let Some(status) = child.try_wait()? {
            bail!(
                "{name} exited ({status}); see {}",
                data_dir.join(format!("{name}.log")).display()
            );
        }
    }
    Ok(())
}
