\set r random(1, 2000000000)
INSERT INTO public.dbdoc_item (id, data, created_at, updated_at, version) VALUES (md5(:r::text || clock_timestamp()::text), '{"tags": ["new", "sale"], "owner": "user1", "price": 12.5, "title": "Bench item"}'::jsonb, now(), now(), 0) RETURNING id;
