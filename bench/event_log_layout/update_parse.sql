\set n random(1, 100000)
\set p random(1, 1000)
UPDATE parse_item SET price = :p, "updatedAt" = now() WHERE "objectId" = left(md5(:n::text), 10) RETURNING *;
