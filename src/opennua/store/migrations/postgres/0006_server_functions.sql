-- From this version on, the server-side functions are installed by the store when it
-- opens, from store/sql/postgres_functions.sql, and this table records the sha256 of the
-- file that was applied, so an opener applies it only when it changed. The functions'
-- signatures changed with it (one nua_unit for every journal op): an older opennua, which
-- would call the functions of migrations 3-5, refuses this database (SchemaTooNew).
CREATE TABLE server_functions (
    sha256 TEXT PRIMARY KEY
);
