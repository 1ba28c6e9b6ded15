//! The command line (clap): global target and output flags, one subcommand per operation.

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "standings",
    version,
    about = "Operate a Standings deployment: its jobs (restore, verify, reshard, drain, archive, dry-run), admin routes and reads",
    after_help = "With no target flag, the local run's endpoints (./scripts/run-local.sh, http://127.0.0.1:9000). \
                  Exit status: 0 when the operation completed, 1 when it was refused or failed, 2 for a usage error, 130 when stopped by Ctrl-C \
                  (the same command again resumes)."
)]
pub struct Cli {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print the answers as JSON (one document), for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the deployment is and how to authenticate (each also from its environment variable).
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// The HTTP API's base URL (the stack's `ApiUrl` output).
    #[arg(long, global = true, env = "STANDINGS_API")]
    pub api: Option<String>,
    /// The Lambda Invoke API's endpoint (the jobs run through it; `cargo lambda watch` serves one).
    #[arg(long, global = true, env = "STANDINGS_LAMBDA_ENDPOINT")]
    pub lambda_endpoint: Option<String>,
    /// A deployed stack: its API URL and function names are read from CloudFormation.
    #[arg(long, global = true, env = "STANDINGS_STACK")]
    pub stack: Option<String>,
    /// The journal function's name (default: the stack's `JournalFunctionName` output with --stack, else `journal`).
    #[arg(long, global = true, env = "STANDINGS_JOURNAL_FUNCTION")]
    pub journal_function: Option<String>,
    /// The archive function's name (default: the stack's `ArchiveFunctionName` output with --stack, else `archive`).
    #[arg(long, global = true, env = "STANDINGS_ARCHIVE_FUNCTION")]
    pub archive_function: Option<String>,
    /// A bearer token for write and admin routes.
    #[arg(long, global = true, env = "STANDINGS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// OAuth client credentials: a token is asked for with these (scope `standings/admin`).
    #[arg(long, global = true, env = "STANDINGS_CLIENT_ID")]
    pub client_id: Option<String>,
    /// The OAuth client's secret (prefer the environment variable: a flag is seen in `ps`).
    #[arg(long, global = true, env = "STANDINGS_CLIENT_SECRET", hide_env_values = true)]
    pub client_secret: Option<String>,
    /// The token endpoint (default: the stack's `JwtIssuer`'s OpenID configuration says it).
    #[arg(long, global = true, env = "STANDINGS_TOKEN_URL")]
    pub token_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Brings boards back from the journal after Redis lost them (invoked until complete).
    Restore {
        /// Only this board (default: every board the journal knows).
        #[arg(long)]
        board: Option<String>,
        /// Goes on with the restore that answered this campaign (its summary's `campaign`, when
        /// it stopped part-way): what it completed is not read again (docs/journal.md#restore).
        #[arg(long)]
        campaign: Option<String>,
    },
    /// Compares boards with their journal.
    Verify {
        /// Only this board (default: every board).
        #[arg(long)]
        board: Option<String>,
    },
    /// Moves a board to the shard count its definition declares (invoked until complete).
    Reshard {
        /// The board to move.
        #[arg(long)]
        board: String,
    },
    /// Drains every board's journal to S3 now.
    Drain {
        /// Also sends the crossings a quiet time holds back.
        #[arg(long)]
        release_held: bool,
    },
    /// Archives an ended season to DynamoDB (invoked until complete).
    Archive {
        /// The board whose season ended.
        #[arg(long)]
        board: String,
        /// The season's id (e.g. 2026-10 for a monthly board).
        #[arg(long)]
        season: String,
        /// Only this part of the season's members (0-based, with --shard-total): parts archived side by side.
        #[arg(long, requires = "shard_total")]
        shard_index: Option<u32>,
        /// Into how many parts the season is split (with --shard-index).
        #[arg(long, requires = "shard_index")]
        shard_total: Option<u32>,
    },
    /// League periods (docs/leagues.md).
    #[command(subcommand)]
    League(League),
    /// Replays a board's period under candidate rules and reports what would change (writes nothing).
    DryRun {
        /// The candidate configuration (TOML).
        #[arg(long)]
        config: std::path::PathBuf,
        /// The board to replay.
        #[arg(long)]
        board: String,
        /// Its period (all, daily, weekly, monthly).
        #[arg(long)]
        period: String,
        /// The period's id (e.g. 2026-11-30, 2026-W48, 2026-11).
        #[arg(long)]
        period_id: String,
    },
    /// Bans a user from every board.
    Ban {
        user: String,
        /// Kept in your shell's history only: the route records who and when, not why.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Lifts a user's ban.
    Unban {
        user: String,
        /// Kept in your shell's history only: the route records who and when, not why.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Corrects a user's points or score on a board (exactly one of --delta, --set).
    Correct {
        board: String,
        user: String,
        /// Adds this many points (negative: takes them off).
        #[arg(long, allow_hyphen_values = true, conflicts_with = "set", required_unless_present = "set")]
        delta: Option<i64>,
        /// Sets the score to this.
        #[arg(long, allow_hyphen_values = true)]
        set: Option<i64>,
        /// Why (required: recorded with the correction).
        #[arg(long)]
        reason: String,
        /// The period corrected (default: the board's all-time).
        #[arg(long)]
        period: Option<String>,
        /// The period's id (default: the current one).
        #[arg(long)]
        period_id: Option<String>,
        /// Makes the correction exactly-once (default: one derived from its arguments).
        #[arg(long)]
        correction_id: Option<String>,
    },
    /// Takes back a user's points from a time range (RFC 3339 instants).
    Void {
        board: String,
        user: String,
        /// The range's start (RFC 3339).
        #[arg(long)]
        from: String,
        /// The range's end (RFC 3339).
        #[arg(long)]
        to: String,
        /// Why (required: recorded with the void).
        #[arg(long)]
        reason: String,
        /// Makes the void exactly-once (default: one derived from its arguments).
        #[arg(long)]
        void_id: Option<String>,
    },
    /// Runtime boards.
    #[command(subcommand)]
    Boards(Boards),
    /// Tournaments.
    #[command(subcommand)]
    Tournaments(Tournaments),
    /// A board's top.
    Top {
        board: String,
        /// The period (default: the board's first).
        #[arg(long)]
        period: Option<String>,
        /// How many entries (the route's default and limit apply).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// A user's rank on a board.
    Rank {
        board: String,
        user: String,
        /// The period (default: the board's first).
        #[arg(long)]
        period: Option<String>,
    },
    /// A user's statement on a board.
    Statement { board: String, user: String },
    /// The admin actions recorded (bans, corrections, voids), newest first.
    Audit {
        /// Only this board's.
        #[arg(long)]
        board: Option<String>,
        /// How many entries (the route's default and limit apply).
        #[arg(long)]
        limit: Option<u32>,
    },
}

#[derive(Debug, Subcommand)]
pub enum League {
    /// Closes an ended league period: promotions, demotions and results (invoked until complete).
    Close {
        /// The board with the league.
        #[arg(long)]
        board: String,
        /// The ended period's id (e.g. 2026-W47); earlier unclosed periods close first.
        #[arg(long)]
        period_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum Boards {
    /// Every board (declared and runtime).
    List,
    /// A board's definition.
    Show { name: String },
    /// Defines a runtime board from a JSON file.
    Put { name: String, file: std::path::PathBuf },
    /// Deletes a runtime board (its name is never defined again).
    Delete {
        name: String,
        /// Why (recorded with the end).
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum Tournaments {
    /// Every tournament (all pages), without prizes and metadata.
    List {
        /// open, upcoming or ended.
        #[arg(long)]
        state: Option<String>,
        /// Only this category.
        #[arg(long)]
        category: Option<String>,
    },
    /// A tournament with its prizes and metadata.
    Show { id: String },
    /// Defines a tournament from a JSON file.
    Put { id: String, file: std::path::PathBuf },
    /// Edits a running tournament with a JSON file of the fields to change.
    Patch { id: String, file: std::path::PathBuf },
    /// Ends the open instance now.
    End {
        id: String,
        /// Why (recorded with the end).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deletes a tournament (its results stay readable; its name is never defined again).
    Delete {
        id: String,
        /// Why (recorded with the end).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Grants a player more attempts in the open instance (recorded in the audit).
    Grant {
        id: String,
        user: String,
        /// How many attempts to add.
        #[arg(long)]
        add: u32,
        /// Why (required: recorded with the grant).
        #[arg(long)]
        reason: String,
        /// Makes the grant exactly-once (default: one derived from its arguments).
        #[arg(long)]
        grant_id: Option<String>,
    },
    /// An instance's results (default: the open one, else the last that ended).
    Results {
        id: String,
        /// The instance's id (`all` for a one-off tournament).
        #[arg(long)]
        instance: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// `--help` of the command and of each subcommand names every flag it takes, each with a
    /// line saying what it does.
    #[test]
    fn every_flag_is_named_and_explained_in_its_commands_help() {
        fn check(command: &mut clap::Command, path: &str, checked: &mut usize) {
            let help = command.render_long_help().to_string();
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                assert!(help.contains(&format!("--{long}")), "`{path} --help` does not name --{long}:\n{help}");
                assert!(arg.get_help().is_some() || arg.get_long_help().is_some(), "`{path} --{long}` has no help text");
                *checked += 1;
            }
            for sub in command.get_subcommands_mut() {
                let name = format!("{path} {}", sub.get_name());
                check(sub, &name, checked);
            }
        }
        let mut cli = Cli::command();
        cli.build();
        let mut checked = 0;
        check(&mut cli, "standings", &mut checked);
        assert!(checked > 100, "the globals in every subcommand, and each one's own: {checked}");
    }
}
