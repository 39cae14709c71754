// The Parse side of `bench.peer_bench --triggers`: one trivial beforeSave and afterSave on Item, the
// equivalent of triggers.py on Trellis's side.
Parse.Cloud.beforeSave('Item', request => {
  request.object.set('stamped', true);
});

Parse.Cloud.afterSave('Item', () => {});
