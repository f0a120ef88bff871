-- GIVE_BACK: ids Redis handed to this worker in a reply that never arrived (a CLAIM or
-- POP_DELAYED cut by an outage): the worker does not know them, so they go back to the
-- lane's free list (still undecided) for any worker to claim.
-- KEYS: P L:<lane>, its :own, :free, :dec.
-- ARGV: worker, lane, id...
-- Returns how many went back.
local ids = {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
return give_back({hash = KEYS[1], own = KEYS[2], free = KEYS[3], dec = KEYS[4]}, ARGV[1], ids,
  prefix_of(KEYS[1], 'L:' .. ARGV[2]), ARGV[2])
