//! The authentication phase of a connection (SCRAM-SHA-256: this module frames the SASL
//! messages and answers errors; `crate::security::scram` runs the exchange with the `pgwire`
//! crate's `ScramServerAuth`), the
//! role statements, and the role's read/write check on every execution.

use super::super::protocol::{protocol_violation, read_frame, Body, Fail};
use super::{fatal, Connection};
use crate::pg::TransactionBackend;
use sql::SqlError;
use tokio::io::{AsyncRead, AsyncWrite};

/// What a failed SCRAM exchange answers.
fn authentication_failed(user: &str) -> Fail {
    Fail::Fatal(SqlError::new(
        "28P01",
        format!("password authentication failed for user \"{user}\""),
    ))
}

impl<B, R, W> Connection<B, R, W>
where
    B: TransactionBackend,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    /// After the StartupMessage: the SCRAM-SHA-256 exchange when authentication is on (a
    /// FATAL 28P01 for a wrong password, an unknown user, a user without LOGIN or password),
    /// and the session's role.
    pub(super) async fn authenticate(&mut self) -> Result<(), Fail> {
        use crate::security::{roles, scram};
        if self.security.tls().is_some() && !self.encrypted {
            return Err(Fail::Fatal(SqlError::new(
                "28000",
                format!(
                    "connection for user \"{}\" refused: this server requires TLS (connect with sslmode=require or verify-full)",
                    self.user_name
                ),
            )));
        }
        if !self.security.required() {
            self.role = Some(roles::Role::unrestricted());
            return Ok(());
        }
        let name = self.user_name.clone();
        let role = if self.security.is_admin_user(&name) {
            self.security.admin_role()
        } else {
            roles::lookup(&self.backend, &name)
                .await
                .map_err(|error| Fail::Fatal(SqlError::new("08006", error.to_string())))?
        };
        let usable = role
            .as_ref()
            .filter(|role| role.rules.enabled)
            .and_then(|role| role.verifier.clone());
        // An unusable user runs the exchange against a verifier no password matches, so a
        // client cannot tell it from a wrong password (PostgreSQL's mock authentication).
        let verifier = usable
            .clone()
            .unwrap_or_else(|| self.security.mock_verifier(&name));
        self.out.authentication_sasl(10, &[]);
        self.flush().await?;
        let first = self.sasl_message(true).await?;
        let (exchange, server_first) =
            scram::server_first(&verifier, &first).map_err(|error| self.scram_failed(error))?;
        self.out.authentication_sasl(11, server_first.as_bytes());
        self.flush().await?;
        let last = self.sasl_message(false).await?;
        let server_final = exchange
            .finish(&last)
            .map_err(|error| self.scram_failed(error))?;
        if usable.is_none() {
            return Err(self.scram_failed(scram::ScramError::WrongProof));
        }
        if let Some(role) = &role {
            self.connection_slot = self
                .security
                .admit(role)
                .map_err(|refusal| Fail::Fatal(SqlError::new("53300", refusal)))?;
        }
        self.out.authentication_sasl(12, server_final.as_bytes());
        self.role = role;
        Ok(())
    }

    fn scram_failed(&self, error: crate::security::scram::ScramError) -> Fail {
        match error {
            crate::security::scram::ScramError::Malformed(reason) => {
                protocol_violation(format!("malformed SCRAM message: {reason}"))
            }
            crate::security::scram::ScramError::WrongProof => {
                crate::log::warn(format_args!(
                    "PostgreSQL authentication failed for user {:?}",
                    self.user_name
                ));
                authentication_failed(&self.user_name)
            }
        }
    }

    /// A SASLInitialResponse (`initial`: mechanism, length, data) or SASLResponse ('p').
    async fn sasl_message(&mut self, initial: bool) -> Result<Vec<u8>, Fail> {
        let Some((tag, body)) = read_frame(&mut self.reader, self.limits.startup_bytes_max).await?
        else {
            return Err(Fail::Io);
        };
        if tag != b'p' {
            return Err(protocol_violation(format!(
                "expected SASL response, got message type {tag}"
            )));
        }
        let mut body = Body::new(&body);
        if !initial {
            return Ok(body.take(body_len(&body))?.to_vec());
        }
        let mechanism = body.cstr().map_err(fatal)?;
        if mechanism != crate::security::scram::MECHANISM {
            return Err(protocol_violation(
                "client selected an invalid SASL authentication mechanism",
            ));
        }
        let length = body.i32()?;
        let data = body.take(
            usize::try_from(length)
                .map_err(|_| protocol_violation("invalid SASL message length"))?,
        )?;
        body.end()?;
        Ok(data.to_vec())
    }

    /// CREATE/ALTER/DROP ROLE, for a superuser.
    pub(super) async fn role_statement(&mut self, query: &str) -> Result<String, Fail> {
        let role = self
            .role
            .clone()
            .unwrap_or_else(crate::security::roles::Role::unrestricted);
        let tag =
            crate::security::roles::run_statement(&self.backend, &self.security, &role, query)
                .await?;
        Ok(tag)
    }

    /// Parse of a role statement or GRANT/REVOKE (pgjdbc sends everything extended): checked
    /// now (a syntax error, also a `$1` PostgreSQL's grammar has no place for, is 42601 at
    /// Parse, as PostgreSQL), kept as text, run at Execute. `statements` gets a placeholder
    /// without parameters or columns, so Describe, Bind and Close work as for any statement.
    /// `false` when `query` is not such a statement.
    pub(super) fn parse_utility(&mut self, name: &str, query: &str) -> Result<bool, Fail> {
        use crate::security::{grants, roles};
        self.utility_statements.remove(name);
        if roles::is_role_statement(query) {
            roles::parse(query)?;
        } else if grants::is_grant_statement(query) {
            grants::parse(query)?;
        } else {
            return Ok(false);
        }
        let placeholder = sql::prepare("", &sql::MemoryCatalog::default(), &[])?;
        assert!(placeholder.parameter_types.is_empty() && placeholder.columns.is_empty());
        self.statements
            .insert(name.to_string(), (placeholder, Vec::new()));
        self.utility_statements
            .insert(name.to_string(), query.to_string());
        self.out.parse_complete();
        Ok(true)
    }

    /// Bind: the portal runs the statement's text at Execute if the statement is a utility
    /// one (and forgets an older binding of the name otherwise).
    pub(super) fn bind_utility(&mut self, statement: &str, portal: &str) {
        match self.utility_statements.get(statement) {
            Some(query) => {
                let query = query.clone();
                self.utility_portals.insert(portal.to_string(), query);
            }
            None => {
                self.utility_portals.remove(portal);
            }
        }
    }

    /// Execute of a portal bound from a role statement or GRANT/REVOKE that has not run yet:
    /// runs it (CommandComplete with its tag). `false` for any other portal (also one that
    /// ran already: its tag is answered again by the ordinary path).
    pub(super) async fn execute_utility(&mut self, portal: &str) -> Result<bool, Fail> {
        let pending = matches!(
            self.portals.get(portal).map(|portal| &portal.state),
            Some(super::PortalState::Pending(_))
        );
        let Some(query) = self
            .utility_portals
            .get(portal)
            .filter(|_| pending)
            .cloned()
        else {
            return Ok(false);
        };
        self.refuse_utility_in_block()?;
        let tag = if crate::security::roles::is_role_statement(&query) {
            self.role_statement(&query).await?
        } else {
            self.grant_statement(&query).await?
        };
        let state = &mut self
            .portals
            .get_mut(portal)
            .expect("the portal was found above")
            .state;
        *state = super::PortalState::Done(Some(tag.clone()));
        self.out.command_complete(&tag);
        Ok(true)
    }

    /// `SHOW max_connections`: the bound this process's pgwire port enforces
    /// (`PgLimits::connections_max`, from `security.max_connections`): per process and port,
    /// not cluster-wide (docs/security.md).
    /// `None` for every other session command (the SQL session answers them).
    pub(super) fn show_server_setting(
        &self,
        command: &sql::SessionCommand,
    ) -> Option<sql::StatementResult> {
        let sql::SessionCommand::Show { name } = command else {
            return None;
        };
        if !name.eq_ignore_ascii_case("max_connections") {
            return None;
        }
        Some(sql::StatementResult::Rows {
            columns: vec![sql::OutputColumn::new(
                "max_connections",
                engine::DataType::Text { length_max: None },
            )],
            rows: vec![vec![engine::Value::Text(
                self.limits.connections_max.to_string(),
            )]],
            tag: "SHOW".to_string(),
        })
    }

    /// GRANT / REVOKE on tables (`crate::security::grants`), against a fresh catalog.
    pub(super) async fn grant_statement(&mut self, query: &str) -> Result<String, Fail> {
        let role = self
            .role
            .clone()
            .unwrap_or_else(crate::security::roles::Role::unrestricted);
        let (_, catalog) = self.catalog(true).await?;
        let tag = crate::security::grants::run_statement(
            &self.backend,
            &self.security,
            &role,
            &catalog,
            query,
        )
        .await?;
        Ok(tag)
    }

    /// A role without `@read` may not read, one without `@write` may not write; a role that
    /// is not a superuser needs its grants on every table it touches (42501).
    pub(super) async fn check_privileges(
        &self,
        operations: &[engine::Operation],
    ) -> Result<(), Fail> {
        let Some(role) = &self.role else {
            return Ok(());
        };
        // `Command::Batch(..).is_read()` without copying the operations (a COPY chunk's rows).
        let read = operations.iter().all(engine::Operation::is_read);
        let (allowed, what) = if read {
            (role.rules.read, "read (the role lacks +@read)")
        } else {
            (role.rules.write, "write (the role lacks +@write)")
        };
        if !allowed {
            return Err(Fail::Error(SqlError::new(
                "42501",
                format!("permission denied for role {} to {what}", role.name),
            )));
        }
        if role.rules.admin {
            return Ok(());
        }
        let held = crate::security::grants::held(&self.backend, &role.name)
            .await
            .map_err(crate::security::roles::unavailable)?;
        let drops = crate::security::grants::drops_not_owned(&held, operations);
        let mut missing = Vec::new();
        if !drops.is_empty() {
            let (_, catalog) = self.catalog(true).await?;
            missing.extend(
                drops
                    .into_iter()
                    .filter(|table| !catalog.tables.contains_key(*table)),
            );
        }
        crate::security::grants::check(&held, operations, &missing)?;
        Ok(())
    }

    /// After a statement ran: a table a non-superuser created is its own; a dropped table's
    /// grants are removed (a new table of the name starts with none).
    pub(super) async fn after_privileged(
        &self,
        operations: &[engine::Operation],
    ) -> Result<(), Fail> {
        use crate::security::{grants, roles};
        // Without authentication every connection is a superuser and grants mean nothing:
        // no extra writes on an insecure cluster's DDL.
        if !self.security.required() {
            return Ok(());
        }
        for operation in operations {
            match operation {
                engine::Operation::CreateTable { schema } => match &self.role {
                    Some(role) if !role.rules.admin => {
                        grants::record_owner(&self.backend, &role.name, &schema.name)
                            .await
                            .map_err(roles::unavailable)?
                    }
                    _ => {}
                },
                engine::Operation::DropTable { name, .. } => {
                    grants::forget_table(&self.backend, name)
                        .await
                        .map_err(roles::unavailable)?
                }
                engine::Operation::AlterTable { table, changes } => {
                    for change in changes {
                        if let engine::TableChange::RenameTable { to } = change {
                            grants::rename_table(&self.backend, table, to)
                                .await
                                .map_err(roles::unavailable)?
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The bytes left in a body.
fn body_len(body: &Body<'_>) -> usize {
    body.remaining()
}
