-- The version of this fresh install: one row per migration it stands for (../migrations/), with
-- the name that migration inserts. A new migration adds its row here too.
INSERT INTO pgque_fifo.schema_version (version, name) VALUES
    (1, 'initial'),
    (2, 'churn tuning and operator view'),
    (3, 'partition keys'),
    (4, 'listen notify'),
    (5, 'least privilege'),
    (6, 'lock order and drained groups'),
    (7, 'claim cursor and caller-safe reaps'),
    (8, 'groups as first-class objects'),
    (9, 'settle and claim'),
    (10, 'scheduled messages'),
    (11, 'oldest groups'),
    (12, 'index plans everywhere'),
    (13, 'resume lets due messages in'),
    (14, 'operator retries'),
    (15, 'claim scan plans'),
    (16, 'one version of each entry point'),
    (17, 'fairness keys'),
    (18, 'job history'),
    (19, 'live workers'),
    (20, 'keyed groups written once'),
    (21, 'browse and search');
