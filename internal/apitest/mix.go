package apitest

import "math/rand"

// Mix is the next state of a list of objects in a random-change test:
// it keeps most of olds (in 20: one dropped, two replaced by change's
// copy, the rest kept as the same object), adds each of news with chance
// 1 in addOneIn, and shuffles the result one time in three. It draws from
// r in a fixed order, so a seed replays the same sequence.
func Mix[T any](r *rand.Rand, olds, news []T, addOneIn int, change func(T) T) []T {
	var out []T
	for _, o := range olds {
		switch x := r.Intn(20); {
		case x == 0:
			// dropped
		case x <= 2:
			out = append(out, change(o))
		default:
			out = append(out, o)
		}
	}
	for _, n := range news {
		if r.Intn(addOneIn) == 0 {
			out = append(out, n)
		}
	}
	if r.Intn(3) == 0 {
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}
