-- Client-matrix scenario for the `mariadb` command-line client: see run.sh.
SELECT CONNECTION_ID() > 0 AS has_id;
SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, @@autocommit, @@sql_mode;
SHOW SESSION STATUS LIKE 'Compression';
DROP TABLE IF EXISTS t;
CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON);
INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, 'café', 'naïve 😀', 12.345, '2024-02-29 13:14:15.123456', X'00FF10', '{"a": [1, 2.5, "x"], "b": null}'), (NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT LAST_INSERT_ID();
SELECT id, n, vl, vu, d, dt, HEX(b), j FROM t ORDER BY id;
UPDATE t SET n = n WHERE id = 1;
UPDATE t SET n = 1 WHERE id IN (1, 2);
SELECT * FROM nosuch;
SELECT CAST('x' AS INT) AS c;
SHOW WARNINGS;
SELECT @@warning_count, @@error_count;
-- Text-protocol prepared statement, executed twice.
PREPARE s FROM 'SELECT id, n, vu, d FROM t WHERE id = ?';
SET @id = 1;
EXECUTE s USING @id;
EXECUTE s USING 2;
DEALLOCATE PREPARE s;
INSERT INTO t (n, vu) VALUES (7, 'seven');
SELECT LAST_INSERT_ID();
START TRANSACTION;
INSERT INTO t (n) VALUES (100);
COMMIT;
START TRANSACTION;
INSERT INTO t (n) VALUES (200);
ROLLBACK;
SELECT id, n FROM t WHERE n >= 100 ORDER BY id;
DROP PROCEDURE IF EXISTS p;
DELIMITER //
CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; SELECT a + 1 AS second, 'x' AS s; SET b = a * 10; END//
DELIMITER ;
CALL p(4, @o);
SELECT @o;
PREPARE c FROM 'CALL p(?, @o)';
EXECUTE c USING 5;
SELECT @o;
SET NAMES latin1;
SELECT 'café' AS s, HEX('café') AS h, vl, HEX(vl) FROM t WHERE id = 1;
SELECT @@character_set_client, @@collation_connection;
SET NAMES utf8mb4;
-- The CLI splits on the delimiter itself; with another delimiter several
-- statements go to the server in one COM_QUERY (CLIENT_MULTI_STATEMENTS).
DELIMITER //
SELECT 1 AS a; SELECT 2 AS b//
SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c//
DELIMITER ;
SELECT CONNECTION_ID() > 0 AS has_id;
