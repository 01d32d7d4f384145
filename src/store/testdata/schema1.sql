-- A workspace database as peak wrote it with store schema 1 (before workflow owners,
-- evaluations and stashes), with a few rows, for the migration test. The blob named by
-- meta eval.2 is written by the test.
PRAGMA journal_mode=WAL;
CREATE TABLE workflows(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  args_json TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  state_json TEXT NOT NULL
);
CREATE TABLE checkpoints(
  id INTEGER PRIMARY KEY,
  parent INTEGER REFERENCES checkpoints(id),
  branch TEXT NOT NULL,
  transformation TEXT NOT NULL,
  message TEXT NOT NULL,
  context_blob TEXT NOT NULL,
  source_blob TEXT NOT NULL,
  summary_json TEXT NOT NULL,
  top_configs_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX checkpoints_parent ON checkpoints(parent);
CREATE TABLE attempts(
  id INTEGER PRIMARY KEY,
  workflow_id INTEGER REFERENCES workflows(id),
  parent_checkpoint INTEGER REFERENCES checkpoints(id),
  transformation TEXT NOT NULL,
  pass_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  region TEXT NOT NULL,
  driver TEXT NOT NULL,
  model TEXT NOT NULL,
  producer TEXT NOT NULL,
  prompt_key TEXT NOT NULL,
  prompt_blob TEXT NOT NULL,
  reply_blob TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  latency_s REAL,
  disposition TEXT NOT NULL,
  error TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX attempts_workflow ON attempts(workflow_id);
CREATE TABLE attempt_checkpoints(
  attempt_id INTEGER NOT NULL REFERENCES attempts(id),
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  created_at TEXT NOT NULL,
  PRIMARY KEY(attempt_id, checkpoint_id)
);
CREATE INDEX attempt_checkpoints_checkpoint ON attempt_checkpoints(checkpoint_id);
CREATE TABLE builds(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  source_hash TEXT NOT NULL,
  config_json TEXT NOT NULL,
  command TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  log_blob TEXT NOT NULL,
  seconds REAL,
  disposition TEXT NOT NULL,
  resources_json TEXT NOT NULL,
  toolchain TEXT NOT NULL,
  cached INTEGER NOT NULL CHECK(cached IN (0, 1)),
  created_at TEXT NOT NULL
);
CREATE INDEX builds_attempt ON builds(attempt_id);
CREATE INDEX builds_source ON builds(source_hash);
CREATE TABLE validations(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  checkpoint_id INTEGER REFERENCES checkpoints(id),
  config_json TEXT NOT NULL,
  shape TEXT NOT NULL,
  hidden INTEGER NOT NULL CHECK(hidden IN (0, 1)),
  seed INTEGER NOT NULL,
  max_abs_err REAL,
  max_rel_err REAL,
  disposition TEXT NOT NULL,
  message TEXT NOT NULL,
  seconds REAL,
  created_at TEXT NOT NULL
);
CREATE INDEX validations_attempt ON validations(attempt_id);
CREATE INDEX validations_checkpoint ON validations(checkpoint_id);
CREATE TABLE measurements(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  checkpoint_id INTEGER REFERENCES checkpoints(id),
  config_json TEXT NOT NULL,
  shape TEXT NOT NULL,
  what TEXT NOT NULL,
  samples_json TEXT NOT NULL,
  median_ms REAL,
  spread REAL,
  gflops REAL,
  disposition TEXT NOT NULL,
  device_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX measurements_attempt ON measurements(attempt_id);
CREATE INDEX measurements_checkpoint ON measurements(checkpoint_id);
CREATE TABLE refs(
  name TEXT PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  updated_at TEXT NOT NULL
);
CREATE TABLE tags(
  name TEXT PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  created_at TEXT NOT NULL
);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TRIGGER workflows_no_delete BEFORE DELETE ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: workflows are append-only'); END;
CREATE TRIGGER workflows_fixed_columns BEFORE UPDATE OF id, kind, args_json, started_at ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: only the status and state of a workflow change'); END;
CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints BEGIN SELECT RAISE(ABORT, 'peak store: checkpoints are append-only'); END;
CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints BEGIN SELECT RAISE(ABORT, 'peak store: checkpoints are append-only'); END;
CREATE TRIGGER attempts_no_update BEFORE UPDATE ON attempts BEGIN SELECT RAISE(ABORT, 'peak store: attempts are append-only'); END;
CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts BEGIN SELECT RAISE(ABORT, 'peak store: attempts are append-only'); END;
CREATE TRIGGER attempt_checkpoints_no_update BEFORE UPDATE ON attempt_checkpoints BEGIN SELECT RAISE(ABORT, 'peak store: attempt_checkpoints are append-only'); END;
CREATE TRIGGER attempt_checkpoints_no_delete BEFORE DELETE ON attempt_checkpoints BEGIN SELECT RAISE(ABORT, 'peak store: attempt_checkpoints are append-only'); END;
CREATE TRIGGER builds_no_update BEFORE UPDATE ON builds BEGIN SELECT RAISE(ABORT, 'peak store: builds are append-only'); END;
CREATE TRIGGER builds_no_delete BEFORE DELETE ON builds BEGIN SELECT RAISE(ABORT, 'peak store: builds are append-only'); END;
CREATE TRIGGER validations_no_update BEFORE UPDATE ON validations BEGIN SELECT RAISE(ABORT, 'peak store: validations are append-only'); END;
CREATE TRIGGER validations_no_delete BEFORE DELETE ON validations BEGIN SELECT RAISE(ABORT, 'peak store: validations are append-only'); END;
CREATE TRIGGER measurements_no_update BEFORE UPDATE ON measurements BEGIN SELECT RAISE(ABORT, 'peak store: measurements are append-only'); END;
CREATE TRIGGER measurements_no_delete BEFORE DELETE ON measurements BEGIN SELECT RAISE(ABORT, 'peak store: measurements are append-only'); END;
CREATE TRIGGER tags_no_update BEFORE UPDATE ON tags BEGIN SELECT RAISE(ABORT, 'peak store: tags are append-only'); END;
CREATE TRIGGER tags_no_delete BEFORE DELETE ON tags BEGIN SELECT RAISE(ABORT, 'peak store: tags are append-only'); END;

INSERT INTO workflows VALUES(1, 'run', '{}', 'done', '2026-01-01T00:00:00.000Z', '2026-01-01T00:10:00.000Z', '{"sequence":"s","next_step":1}');
INSERT INTO workflows VALUES(2, 'apply', '{}', 'running', '2026-01-02T00:00:00.000Z', '', '');
INSERT INTO checkpoints VALUES(1, NULL, 'main', '', 'seed', 'ctx', 'src', '{}', '[]', '2026-01-01T00:00:00.000Z');
INSERT INTO checkpoints VALUES(2, 1, 'main', 'refactor', 'apply refactor', 'ctx', 'src2', '{"disposition":"passed","bench":[{"shape":"M=64","gflops":2.5,"disposition":"passed"}],"device":{"name":"llvmpipe"}}', '[]', '2026-01-01T00:05:00.000Z');
INSERT INTO attempts VALUES(1, 1, 1, 'refactor', 1, 1, 'device', 'replay', 'm', 'p', 'k', '', '', 0, 0, 1.5, 'passed', '', '2026-01-01T00:04:00.000Z');
INSERT INTO refs VALUES('main', 2, '2026-01-01T00:05:00.000Z');
INSERT INTO tags VALUES('seed', 1, '2026-01-01T00:00:00.000Z');
INSERT INTO meta VALUES('HEAD', 'main');
INSERT INTO meta VALUES('eval.2', '@EVAL_BLOB@');
INSERT INTO meta VALUES('reference.x', 'keep');
PRAGMA user_version = 1;
