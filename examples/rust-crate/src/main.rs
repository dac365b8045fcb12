//! Prints a point formatted by C's variadic `snprintf`.

fn main() {
    println!("{}", variadic_demo::describe_point(c"origin", 0, -7, 2.25));
}
